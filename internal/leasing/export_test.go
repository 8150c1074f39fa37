package leasing

// UseScriptRenewal makes b, a backend of [NewRedisBackend], renew with
// lease_renew.lua as on a server without PEXPIRE's GT flag.
func UseScriptRenewal(b Backend) { b.(*redisBackend).native.Store(false) }

// RenewsNatively reports whether b renews with plain commands.
func RenewsNatively(b Backend) bool { return b.(*redisBackend).native.Load() }
