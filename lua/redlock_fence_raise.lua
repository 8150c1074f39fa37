-- redlock_fence_raise.lua: phase 2 of a Redlock fence, on one master: write
-- back the fence chosen (the maximum of a quorum's proposals), so that every
-- later quorum, which overlaps this one, proposes more.
-- KEYS[1]  the name's fence counter on this master (decimal string)
-- ARGV[1]  the chosen fence (decimal string)
-- ARGV[2]  the counter's retention in milliseconds
-- Returns  1 when the counter was raised to ARGV[1]
--          0 when it already held ARGV[1] or more (left as it was)
local f = tonumber(ARGV[1])
local prev = tonumber(redis.call('GET', KEYS[1]))
if prev and prev >= f then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
