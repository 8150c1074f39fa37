-- lease_cancel.lua: ask the holder of a lease to cancel its attempt (a plain
-- script). The request is stored in the lease key, for the fence the
-- operator saw only (a takeover writes a new lease key, without it): its
-- value gains ' <fence>' (lease_acquire.lua), its TTL kept. The holder
-- learns it from its next renewal (the GETEX of the plain renewal returns
-- it; lease_renew.lua, where it runs, answers 3). The operator's reason is
-- logged and traced by the caller, not stored: every renewal reads the value.
--
-- With an idempotency key's cancel mark (KEYS[2]), the fence is also
-- written there, kept ARGV[2] ms (the record's retention): when the attempt
-- loses its lease before it records the cancel, the claim that takes the key
-- over finds the mark and is covered by the cancel (idem_claim.lua).
--
-- KEYS[1]   lease key (a string: lease_acquire.lua)
-- KEYS[2]   optional: the key's cancel mark (<prefix>idem:x:<tag>:<key>)
-- ARGV[1]   fence of the attempt to cancel, as a decimal string
-- ARGV[2]   with KEYS[2]: the mark's TTL in milliseconds
-- Returns   1 stored (or asked before for this fence), 0 no lease (the key
--           is not running), 2 the lease has another fence
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local head, fen = string.match(cur, '^(%S+ (%d+) %d+)')
if fen ~= ARGV[1] then
  return 2
end
redis.call('SET', KEYS[1], head .. ' ' .. ARGV[1], 'KEEPTTL')
if KEYS[2] then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
end
return 1
