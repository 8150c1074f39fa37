-- idem_details_batch.lua: idem_details.lua for many attempts in one call (a
-- plain script): save each attempt's heartbeat details, for its lease holder
-- only. The idempotency Store sends coalesced details so, once per lease
-- renew round, instead of one call per heartbeat. On a Cluster every key of
-- one call must be in one slot (the caller groups them).
--
-- KEYS[2i-1]  lease key of entry i (a string: lease_acquire.lua)
-- KEYS[2i]    heartbeat details key of entry i (string)
-- ARGV[1]     time to keep the details, in milliseconds (the retention)
-- ARGV[3i-1]  owner token of entry i
-- ARGV[3i]    fence of entry i, as a decimal string
-- ARGV[3i+1]  details of entry i
-- Returns     one code per entry, in order: 1 saved, -1 lease lost (nothing
--             written for that entry)
local out = {}
for i = 1, #KEYS / 2 do
  local a = 3 * i
  local owner = redis.call('GET', KEYS[2 * i - 1])
  local want = ARGV[a - 1] .. ' ' .. ARGV[a] .. ' '
  if not owner or string.sub(owner, 1, #want) ~= want then
    out[i] = -1
  else
    redis.call('SET', KEYS[2 * i], ARGV[a + 1], 'PX', ARGV[1])
    out[i] = 1
  end
end
return out
