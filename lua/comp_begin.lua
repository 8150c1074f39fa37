-- comp_begin.lua (fenced by the journal's compensation lease): start (or
-- resume) compensating a journal.
-- KEYS[1]  the compensation lease key   KEYS[2]  the journal hash
-- KEYS[3]  the job's lease key (read only, to tell a live owner)
-- ARGV[1]  compensation lease token     ARGV[2]  compensation lease fence
-- ARGV[3]  mode: owner (the job's own trigger), sweep (recovery: only when
--          the job's owner no longer holds its lease, never a sealed
--          journal), force (takeover: also sealed), retry (also dead)
-- ARGV[4]  retention of an unfinished journal, ms
-- Returns  {code, steps}: 1 compensating; 0 no journal; 2 already
--          compensated; 3 committed; 4 dead-lettered; 5 owner still holds
--          the job lease; 6 sealed; -1 compensation lease lost.
local j = redis.call('HMGET', KEYS[2], 'st', 'tok', 'fen', 'n')
local st = j[1]
if not st then
  return {0, 0}
end
local n = tonumber(j[4])
local mode = ARGV[3]
if st == 'done' then
  return {2, n}
end
if st == 'committed' then
  return {3, n}
end
if st == 'dead' and mode ~= 'retry' then
  return {4, n}
end
if mode == 'sweep' and (st == 'open' or st == 'sealed') then
  local o = redis.call('GET', KEYS[3])
  local want = tostring(j[2]) .. ' ' .. tostring(j[3]) .. ' '
  if o and string.sub(o, 1, #want) == want then
    return {5, n}
  end
  if st == 'sealed' then
    return {6, n}
  end
end
if mode == 'retry' then
  for i = 1, n do
    local p = 's:' .. i .. ':'
    if redis.call('HGET', KEYS[2], p .. 'st') == 'dead' then
      redis.call('HSET', KEYS[2], p .. 'st', 'retry', p .. 't', 0)
    end
  end
end
redis.call('HSET', KEYS[2], 'st', 'comp')
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {1, n}
