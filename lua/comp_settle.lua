-- comp_settle.lua (fenced by the compensation lease): close a compensation
-- pass: compensated when every step is, dead-lettered when a step is.
-- KEYS[1]  the compensation lease key   KEYS[2]  the journal hash
-- KEYS[3]  the lease name's journal index
-- ARGV[1]  compensation lease token     ARGV[2]  compensation lease fence
-- ARGV[3]  retention of a finished journal, ms
-- Returns  {code, pending, dead}: 2 compensated; 3 dead-lettered (kept
--          without expiry); 1 steps still pending (run another pass);
--          {-2} not being compensated; -1 lease lost.
local j = redis.call('HMGET', KEYS[2], 'st', 'n', 'fen')
if j[1] ~= 'comp' then
  return {-2, 0, 0}
end
local pending, dead = 0, 0
for i = 1, tonumber(j[2]) do
  local s = redis.call('HGET', KEYS[2], 's:' .. i .. ':st')
  if s == 'dead' then
    dead = dead + 1
  elseif s ~= 'comp' then
    pending = pending + 1
  end
end
if dead > 0 then
  redis.call('HSET', KEYS[2], 'st', 'dead')
  redis.call('PERSIST', KEYS[2])
  return {3, pending, dead}
end
if pending > 0 then
  return {1, pending, 0}
end
redis.call('HSET', KEYS[2], 'st', 'done')
redis.call('ZREM', KEYS[3], j[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {2, 0, 0}
