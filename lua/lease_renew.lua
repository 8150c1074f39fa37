-- lease_renew.lua: extend the leases that the caller still holds, one or many
-- in one call (every key must be in one Cluster slot when run on a Cluster).
-- Used where the server lacks GETEX (before Redis 6.2); elsewhere the
-- renewer sends one plain command a lease (internal/leasing/renew_native.go).
-- KEYS[i]      the i-th lease key (a string '<token> <fence> <ttl ms>', then
--              ' <cx>' when an operator asked the attempt under
--              fence cx to cancel: lease_acquire.lua, lease_cancel.lua)
-- ARGV[3i-2]   the caller's owner token for KEYS[i]
-- ARGV[3i-1]   the caller's fence for KEYS[i], as a decimal string
-- ARGV[3i]     the new TTL of KEYS[i] in milliseconds
-- Returns      an array with one status a key, in order:
--              1  renewed: the key now expires ARGV[3i] ms from now
--              0  no owner: the key expired or was released
--              2  another owner (token or fence differs): the lease was stolen
--              3  renewed, and an operator asked to cancel this attempt (cx
--                 equals its fence): the holder stops its work
local out = {}
for i = 1, #KEYS do
  local a = 3 * i
  local cur = redis.call('GET', KEYS[i])
  local want = ARGV[a - 2] .. ' ' .. ARGV[a - 1] .. ' '
  if not cur then
    out[i] = 0
  elseif string.sub(cur, 1, #want) ~= want then
    out[i] = 2
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[a])
    if string.match(cur, '^%S+ %d+ %d+ (%d+)') == ARGV[a - 1] then
      out[i] = 3
    else
      out[i] = 1
    end
  end
end
return out
