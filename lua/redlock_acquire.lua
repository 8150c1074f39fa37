-- redlock_acquire.lua: one master's part of a Redlock acquisition (the SET NX
-- of the Redlock algorithm), refused while the master is in its restart
-- quarantine.
-- KEYS[1]  the lock key (a string holding the owner token)
-- KEYS[2]  the master's epoch key: the server time, in milliseconds, at which a
--          client first found this master without one (its data is that old)
-- ARGV[1]  the owner token
-- ARGV[2]  the lock TTL in milliseconds
-- ARGV[3]  the quarantine in milliseconds: a master whose epoch is younger
--          than this takes no locks, since locks it held before losing its
--          data may still be live elsewhere (0 disables the check)
-- Returns  {1, 0}              locked
--          {0, 0}              held by another token
--          {-2, remaining_ms}  quarantined for remaining_ms more
local now = redis.call('TIME')
local nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local q = tonumber(ARGV[3])
if q > 0 then
  local epoch = tonumber(redis.call('GET', KEYS[2]))
  if not epoch then
    epoch = nowms
    redis.call('SET', KEYS[2], string.format('%.0f', epoch))
  end
  if nowms - epoch < q then
    return {-2, q - (nowms - epoch)}
  end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, 0}
end
return {0, 0}
