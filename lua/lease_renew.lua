-- lease_renew.lua: extend the leases that the caller still holds, one or many
-- in one call (every key must be in one Cluster slot when run on a Cluster).
-- KEYS[i]      the i-th lease key (a hash: tok = owner token, fen = fence)
-- ARGV[3i-2]   the caller's owner token for KEYS[i]
-- ARGV[3i-1]   the caller's fence for KEYS[i], as a decimal string
-- ARGV[3i]     the new TTL of KEYS[i] in milliseconds
-- Returns      an array with one status a key, in order:
--              1  renewed: the key now expires ARGV[3i] ms from now
--              0  no owner: the key expired or was released
--              2  another owner (token or fence differs): the lease was stolen
local out = {}
for i = 1, #KEYS do
  local a = 3 * i
  local cur = redis.call('HMGET', KEYS[i], 'tok', 'fen')
  if not cur[1] then
    out[i] = 0
  elseif cur[1] ~= ARGV[a - 2] or cur[2] ~= ARGV[a - 1] then
    out[i] = 2
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[a])
    out[i] = 1
  end
end
return out
