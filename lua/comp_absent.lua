-- comp_absent.lua: before the recovery sweep drops an index entry whose
-- journal it read as absent, tell whether the journal is gone for good. The
-- recovery index lies in another Cluster slot, so the sweep removes the entry
-- itself, and only on 1: that answer cannot change afterwards, since a
-- journal is created by its owner's first intent, which is fenced by the job
-- lease under the journal's fence, and a fence is never handed out twice.
-- KEYS[1]  the journal hash
-- KEYS[2]  the job's lease key (read only)
-- ARGV[1]  the journal's fence, as a decimal string
-- Returns  1 gone: no journal, and the lease is not held under that fence;
--          0 the journal exists (created since the sweep read it);
--          2 no journal yet, but the lease is held under that fence: its
--          owner's first intent may still create it.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local o = redis.call('GET', KEYS[2])
if o and string.match(o, '^%S+ (%d+) ') == ARGV[1] then
  return 2
end
return 1
