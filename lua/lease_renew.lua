-- lease_renew.lua: extend a lease that the caller still holds.
-- KEYS[1]  the lease key (a hash: tok = owner token, fen = fence)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the caller's fence, as a decimal string
-- ARGV[3]  the new TTL in milliseconds
-- Returns  1  renewed: the key now expires ARGV[3] ms from now
--          0  no owner: the key expired or was released
--          2  another owner (token or fence differs): the lease was stolen
local cur = redis.call('HMGET', KEYS[1], 'tok', 'fen')
if not cur[1] then
  return 0
end
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
