-- lease_acquire.lua: take the lease on one name if nobody holds it.
-- KEYS[1]  the lease key (a hash: tok = owner token, fen = fence)
-- ARGV[1]  the new owner token (unique to this acquisition)
-- ARGV[2]  the lease TTL in milliseconds
-- Returns  {1, fence}          acquired; fence is a decimal string
--          {2, token, pttl}    held by the owner token, for pttl more milliseconds
-- The fence is max(previous fence + 1, server TIME in microseconds): the
-- previous fence is read from the hash when it is still there (a record left
-- without an owner), and server time covers the keys that are gone (released,
-- expired, or lost in a restart), assuming the server clock does not go back.
local cur = redis.call('HMGET', KEYS[1], 'tok', 'fen')
if cur[1] then
  return {2, cur[1], redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
local prev = tonumber(cur[2])
if prev and prev >= fence then
  fence = prev + 1
end
local fen = string.format('%.0f', fence)
redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'fen', fen)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fen}
