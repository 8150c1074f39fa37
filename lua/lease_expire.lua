-- lease_expire.lua: end a lease now, as if its holder had stopped renewing
-- (an operator's expire: inspect.Inspector.Expire), only while it is the
-- lease the operator read. A plain script rather than a WATCH transaction,
-- which the least-privilege ACL (docs/security.md) does not allow. The
-- holder's renewals extend the key without changing its value, so they do
-- not stop it; a takeover, a release or a cancel request changes the value.
--
-- KEYS[1]   lease key (a string '<token> <fence> <ttl ms>[ <cx>]':
--           lease_acquire.lua)
-- ARGV[1]   the value the operator read
-- Returns   1 expired (the key lives 1 ms more), 0 the key holds another
--           value or none: read it again
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], 1)
return 1
