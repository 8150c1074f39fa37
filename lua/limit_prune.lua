-- limit_prune.lua: remove from the limit-group registry the groups no worker
-- registered since a cutoff (a plain script). The caller read the candidates
-- in an HSCAN page; each is read again here and removed only if its
-- last-seen time is still before the cutoff, so a group another worker
-- registered in between stays. A value not of limit.Register's form is left.
--
-- KEYS[1]  the registry: a hash, group -> "<limit> <rate> <burst> <seen Unix ms>"
-- ARGV[1]  the cutoff (Unix ms, the workers' clock, as limit.Register writes seen)
-- ARGV[i]  (i >= 2) a candidate group
-- Returns  the number of groups removed
local cutoff = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  local seen = v and tonumber(string.match(v, '^%S+ %S+ %S+ (%d+)$'))
  if seen and seen < cutoff then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
