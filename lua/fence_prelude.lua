-- fence_prelude.lua: prepended to every fenced script (see lua.Fenced).
-- KEYS[1]  the lease key (a hash with fields tok = owner token, fen = fence)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the caller's fence, as a decimal string
-- Returns  -1 (StatusLost) when the lease is absent, held by another token, or
--          carries another fence; otherwise falls through to the script body.
local lh_owner = redis.call('HMGET', KEYS[1], 'tok', 'fen')
if lh_owner[1] ~= ARGV[1] or lh_owner[2] ~= ARGV[2] then
  return -1
end
