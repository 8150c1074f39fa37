-- lease_release.lua: delete a lease, only for its owner.
-- KEYS[1]  the lease key (a hash: tok = owner token, fen = fence)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the caller's fence, as a decimal string; "0" matches any fence (the
--          token alone identifies an acquisition whose answer was lost)
-- Returns  1  released: the key is deleted
--          0  no owner: the key expired or was already released
--          2  another owner (token or fence differs): nothing is changed
local cur = redis.call('HMGET', KEYS[1], 'tok', 'fen')
if not cur[1] then
  return 0
end
if cur[1] ~= ARGV[1] or (ARGV[2] ~= '0' and cur[2] ~= ARGV[2]) then
  return 2
end
redis.call('DEL', KEYS[1])
return 1
