-- comp_finish.lua (fenced by the compensation lease): record the outcome of
-- a compensation attempt on a step this holder claimed.
-- KEYS[1]  the compensation lease key   KEYS[2]  the journal hash
-- ARGV[1]  compensation lease token     ARGV[2]  compensation lease fence
-- ARGV[3]  step number
-- ARGV[4]  outcome: 1 compensated, 2 failed (will retry), 3 dead-lettered
-- ARGV[5]  error text (bounded by the caller)
-- ARGV[6]  the step generation the attempt ran for
-- Returns  1 recorded; 0 superseded (the claim is not ours, or a late effect
--          reopened the step with a newer generation); -1 lease lost.
local p = 's:' .. ARGV[3] .. ':'
local s = redis.call('HMGET', KEYS[2], p .. 'st', p .. 'by', p .. 'g')
if s[1] ~= 'claimed' or s[2] ~= ARGV[2] or s[3] ~= ARGV[6] then
  return 0
end
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[2], p .. 'st', 'comp')
elseif ARGV[4] == '2' then
  redis.call('HSET', KEYS[2], p .. 'e', ARGV[5])
else
  redis.call('HSET', KEYS[2], p .. 'st', 'dead', p .. 'e', ARGV[5])
end
return 1
