-- comp_claim.lua (fenced by the compensation lease): claim one step for a
-- compensation attempt. Only the holder of the journal's compensation lease
-- can claim, and a claim left by an earlier holder (which died) is taken over.
-- KEYS[1]  the compensation lease key   KEYS[2]  the journal hash
-- ARGV[1]  compensation lease token     ARGV[2]  compensation lease fence
-- ARGV[3]  step number
-- Returns  {1, attempt, generation, handler, args, done, step name} claimed;
--          {2} already compensated; {4} dead-lettered; {-2} the journal is
--          not being compensated; {-3} no such step; -1 lease lost.
if redis.call('HGET', KEYS[2], 'st') ~= 'comp' then
  return {-2}
end
local p = 's:' .. ARGV[3] .. ':'
local s = redis.call('HMGET', KEYS[2], p .. 'st', p .. 'h', p .. 'a', p .. 'g', p .. 'ok', p .. 'name')
if not s[1] then
  return {-3}
end
if s[1] == 'comp' then
  return {2}
end
if s[1] == 'dead' then
  return {4}
end
local t = redis.call('HINCRBY', KEYS[2], p .. 't', 1)
redis.call('HSET', KEYS[2], p .. 'st', 'claimed', p .. 'by', ARGV[2])
local ok = 0
if s[5] == '1' then
  ok = 1
end
return {1, t, tonumber(s[4]), s[2], s[3], ok, s[6]}
