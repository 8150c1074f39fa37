-- lease_cancel.lua: ask the holder of a lease to cancel its attempt (a plain
-- script). The request is stored in the lease hash, for the fence the
-- operator saw only, so that it applies to the attempt running when it was
-- asked and never to a later one (a takeover writes a new lease key). The
-- holder learns it from its next renewal (the HMGET of the plain renewal
-- reads cx; lease_renew.lua, where it runs, answers 3).
--
-- KEYS[1]   lease key (a hash: tok = owner token, fen = fence)
-- ARGV[1]   fence of the attempt to cancel, as a decimal string
-- ARGV[2]   reason (may be empty), kept in field cr
-- Returns   1 stored (or asked before for this fence), 0 no lease (the key
--           is not running), 2 the lease has another fence
local cur = redis.call('HMGET', KEYS[1], 'tok', 'fen')
if not cur[1] then
  return 0
end
if cur[2] ~= ARGV[1] then
  return 2
end
redis.call('HSET', KEYS[1], 'cx', ARGV[1], 'cr', ARGV[2])
return 1
