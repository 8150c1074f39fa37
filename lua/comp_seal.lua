-- comp_seal.lua (fenced): mark an open journal sealed just before the job's
-- fenced commit, so that the recovery sweep leaves it alone (the commit may
-- have landed); a takeover, which proves the commit did not land, still
-- compensates it.
-- KEYS[1]  the job's lease key      KEYS[2]  the journal hash
-- ARGV[1]  owner token              ARGV[2]  fence
-- Returns  1 sealed (or already); 0 no journal (no steps); -1 lease lost;
--          -2 compensation began.
local st = redis.call('HGET', KEYS[2], 'st')
if not st then
  return 0
end
if st == 'open' or st == 'sealed' then
  redis.call('HSET', KEYS[2], 'st', 'sealed')
  return 1
end
return -2
