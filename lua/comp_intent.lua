-- comp_intent.lua (fenced): journal the intent of one saga step before its
-- side effect runs. Creates the journal on the first step.
-- KEYS[1]  the job's lease key (checked by the fence prelude)
-- KEYS[2]  the journal hash of (lease name, fence)
-- KEYS[3]  the lease name's journal index: sorted set of fences with a journal
-- ARGV[1]  owner token       ARGV[2]  fence (decimal)
-- ARGV[3]  lease name        ARGV[4]  step name
-- ARGV[5]  compensation handler name
-- ARGV[6]  encoded handler arguments
-- ARGV[7]  retention of an open journal, ms
-- ARGV[8]  maximum steps per journal
-- Returns  n >= 1: the step's number; -1 lease lost; -2 journal no longer
--          open (compensation or commit began); -3 too many steps.
local jst = redis.call('HGET', KEYS[2], 'st')
if jst and jst ~= 'open' then
  return -2
end
if not jst then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[2], 'name', ARGV[3], 'fen', ARGV[2], 'tok', ARGV[1],
    'st', 'open', 'n', 0, 't0', now)
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[2])
end
local n = tonumber(redis.call('HGET', KEYS[2], 'n'))
if n >= tonumber(ARGV[8]) then
  return -3
end
n = n + 1
local p = 's:' .. n .. ':'
redis.call('HSET', KEYS[2], 'n', n, p .. 'name', ARGV[4], p .. 'h', ARGV[5],
  p .. 'a', ARGV[6], p .. 'st', 'intent', p .. 't', 0, p .. 'g', 1)
redis.call('PEXPIRE', KEYS[2], ARGV[7])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
return n
