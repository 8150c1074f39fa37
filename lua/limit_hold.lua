-- limit_hold.lua: hold every job of a limit group until a time (a plain
-- script): a handler's Retry-After, fleet-wide. A hold never shortens one
-- that lasts longer. Redis TIME is the clock.
--
-- KEYS[1]  hold-until: a string, the hold's end (Unix ms), expiring with it
-- ARGV[1]  the hold in ms from now (> 0)
-- Returns  the hold left in ms (ARGV[1], or the longer hold in place)
local d = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left >= d then
  return left
end
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], nowms + d, 'PX', d)
return d
