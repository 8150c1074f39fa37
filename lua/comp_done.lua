-- comp_done.lua: mark a journaled step done after its side effect returned.
-- Not fenced: the effect happened whether or not the lease is still held.
-- KEYS[1]  the journal hash
-- KEYS[2]  the lease name's journal index (sorted set of fences)
-- ARGV[1]  step number      ARGV[2]  owner token of the journal
-- ARGV[3]  retention of an open journal, ms
-- Returns  1 marked done; 2 late: compensation of this step had already begun
--          while it was in doubt, so the step is reopened with the next
--          generation and must be compensated again; -3 no such step;
--          -4 no journal; -5 the journal belongs to another token.
local j = redis.call('HMGET', KEYS[1], 'st', 'tok', 'fen')
if not j[1] then
  return -4
end
if j[2] ~= ARGV[2] then
  return -5
end
local p = 's:' .. ARGV[1] .. ':'
local s = redis.call('HGET', KEYS[1], p .. 'st')
if not s then
  return -3
end
if s == 'intent' or s == 'done' then
  redis.call('HSET', KEYS[1], p .. 'st', 'done', p .. 'ok', '1')
  return 1
end
redis.call('HINCRBY', KEYS[1], p .. 'g', 1)
redis.call('HSET', KEYS[1], p .. 'st', 'done', p .. 'ok', '1', p .. 't', 0)
if j[1] == 'done' or j[1] == 'dead' then
  redis.call('HSET', KEYS[1], 'st', 'comp')
  redis.call('ZADD', KEYS[2], j[3], j[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 2
