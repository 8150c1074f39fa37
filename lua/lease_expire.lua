-- lease_expire.lua: end a lease now, as if its holder had stopped renewing
-- (an operator's expire: inspect.Inspector.Expire), only while it is the
-- lease the operator read. A plain script rather than a WATCH transaction,
-- which the least-privilege ACL (docs/security.md) does not allow. The
-- holder's renewals extend the key without changing its value, so they do
-- not stop it; a takeover, a release or a cancel request changes the value.
-- The key is deleted, not given a TTL of 1 ms: a renewal (GETEX PX) that
-- reached Redis within that millisecond extended the key again and undid
-- the expire, unseen by the operator. The holder's next renewal finds no key
-- and loses the lease.
--
-- KEYS[1]   lease key (a string '<token> <fence> <ttl ms>[ <cx>]':
--           lease_acquire.lua)
-- ARGV[1]   the value the operator read
-- Returns   1 expired (the key is gone), 0 the key holds another value or
--           none: read it again
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
