-- lease_release.lua: delete a lease, only for its owner.
-- KEYS[1]  the lease key (a string: lease_acquire.lua)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the caller's fence, as a decimal string; "0" matches any fence (the
--          token alone identifies an acquisition whose answer was lost)
-- Returns  1  released: the key is deleted
--          0  no owner: the key expired or was already released
--          2  another owner (token or fence differs): nothing is changed
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local want = ARGV[1] .. ' '
if ARGV[2] ~= '0' then
  want = want .. ARGV[2] .. ' '
end
if string.sub(cur, 1, #want) ~= want then
  return 2
end
redis.call('DEL', KEYS[1])
return 1
