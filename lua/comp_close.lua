-- comp_close.lua: mark a journal committed after the job's commit landed; it
-- will never be compensated and expires after the closed retention.
-- KEYS[1]  the journal hash         KEYS[2]  the lease name's journal index
-- ARGV[1]  owner token of the journal
-- ARGV[2]  retention of a closed journal, ms
-- Returns  1 closed; 0 no journal; -2 compensation began; -5 another token.
local j = redis.call('HMGET', KEYS[1], 'st', 'tok', 'fen')
if not j[1] then
  return 0
end
if j[2] ~= ARGV[1] then
  return -5
end
if j[1] ~= 'open' and j[1] ~= 'sealed' and j[1] ~= 'committed' then
  return -2
end
redis.call('HSET', KEYS[1], 'st', 'committed')
redis.call('ZREM', KEYS[2], j[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
