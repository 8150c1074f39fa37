-- redlock_fence_next.lua: phase 1 of a Redlock fence, on one master: propose
-- the next fence for a name and remember it.
-- KEYS[1]  the name's fence counter on this master (decimal string)
-- ARGV[1]  the counter's retention in milliseconds (refreshed on each use)
-- Returns  max(counter + 1, server TIME in microseconds), now stored in KEYS[1]
local now = redis.call('TIME')
local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
local prev = tonumber(redis.call('GET', KEYS[1]))
if prev and prev >= fence then
  fence = prev + 1
end
redis.call('SET', KEYS[1], string.format('%.0f', fence), 'PX', ARGV[1])
return fence
