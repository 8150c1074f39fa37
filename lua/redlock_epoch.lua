-- redlock_epoch.lua: read (or start) a Redlock master's epoch, the age of its
-- data, so that clients can tell a master restarted without its data.
-- KEYS[1]  the master's epoch key (server time in milliseconds, no TTL)
-- Returns  the epoch's age in milliseconds; 0 when this call started it (the
--          master had no epoch: it is new, or it lost its data)
local now = redis.call('TIME')
local nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local epoch = tonumber(redis.call('GET', KEYS[1]))
if not epoch then
  redis.call('SET', KEYS[1], string.format('%.0f', nowms))
  return 0
end
return nowms - epoch
