package benchkit

import "errors"

// ErrPortTaken is returned by [StartRedis] when the port it picked is
// answered by a process other than the redis-server it started (another
// process bound the port between the free-port check and the server's bind)
// on every attempt.
var ErrPortTaken = errors.New("benchkit: port answered by another process")

// ErrExited is returned by [StartRedis] when the redis-server it started
// exits before answering; the error also carries the end of the server's log.
var ErrExited = errors.New("benchkit: redis-server exited")

// ErrFigure is returned by [Figures.Err] when a figure's name is not made of
// lower-case letters, digits and underscores, or its unit holds white space
// or '=': such a line would not read back as `name=value unit`.
var ErrFigure = errors.New("benchkit: malformed figure")
