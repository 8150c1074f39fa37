-- fence_prelude.lua: prepended to every fenced script (see lua.Fenced).
-- KEYS[1]  the lease key (a string '<token> <fence> <ttl ms>[ <cancel>]':
--          lease_acquire.lua)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the caller's fence, as a decimal string
-- Returns  -1 (StatusLost) when the lease is absent, held by another token, or
--          carries another fence; otherwise falls through to the script body.
local lh_owner = redis.call('GET', KEYS[1])
local lh_want = ARGV[1] .. ' ' .. ARGV[2] .. ' '
if not lh_owner or string.sub(lh_owner, 1, #lh_want) ~= lh_want then
  return -1
end
