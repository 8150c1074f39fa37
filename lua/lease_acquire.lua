-- lease_acquire.lua: take the lease on one name if nobody holds it.
-- KEYS[1]  the lease key
-- ARGV[1]  the new owner token (unique to this acquisition; no spaces)
-- ARGV[2]  the lease TTL in milliseconds
-- Returns  {1, fence}          acquired; fence is a decimal string
--          {2, token, pttl}    held by the owner token, for pttl more milliseconds
--
-- A lease key is a string, expiring with the lease (PX = the time left):
--   '<token> <fence> <ttl ms>'                 held
--   '<token> <fence> <ttl ms> <cx>'            held, and an operator asked the
--                                              attempt under fence cx to cancel
--                                              (lease_cancel.lua)
-- The token is the owner's (new with every acquisition, never written by
-- anyone else), the fence a decimal integer, ttl the TTL the holder renews
-- with. A holder checks it by prefix: '<token> <fence> '. One string makes
-- the claim one command (SET NX PX) and a renewal one (GETEX PX, which
-- returns what it extended: internal/leasing/renew_native.go).
-- The fence is server TIME in microseconds: a key exists only while held
-- (nothing leaves one without an owner), so every earlier fence of the name
-- is below it, assuming the server clock does not go back.
local now = redis.call('TIME')
local fen = string.format('%.0f', tonumber(now[1]) * 1000000 + tonumber(now[2]))
if redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. fen .. ' ' .. ARGV[2], 'NX', 'PX', ARGV[2]) then
  return {1, fen}
end
local cur = redis.call('GET', KEYS[1])
return {2, string.match(cur, '^%S*'), redis.call('PTTL', KEYS[1])}
