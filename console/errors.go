package console

import "errors"

// ErrNoRedis is returned by [New] when Config.Redis is nil.
var ErrNoRedis = errors.New("console: no Redis client: set Config.Redis")

// ErrActionsNeedAuth is returned by [New] when Config.Actions is set without
// a token or a user and password in Config.Auth: actions are never open to
// anyone who reaches the port.
var ErrActionsNeedAuth = errors.New("console: actions need authentication: set Config.Auth (LEASEHOLD_UI_TOKEN, or LEASEHOLD_UI_USER and LEASEHOLD_UI_PASSWORD)")

// ErrBadAuth is returned by [New] when Config.Auth sets a user without a
// password or the other way round, or a token and a user both.
var ErrBadAuth = errors.New("console: Config.Auth: set a token, or a user and a password, not both")
