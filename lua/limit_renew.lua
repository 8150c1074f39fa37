-- limit_renew.lua: move the deadlines of the running slots one worker holds
-- in one limit group (a plain script), once a lease renew round for all of
-- them. A slot already gone (pruned after its deadline, released) is not
-- added back: the group may have given it to another job meanwhile.
--
-- KEYS[1]     slots: the group's sorted set (limit_acquire.lua)
-- ARGV[2i-1]  the i-th member
-- ARGV[2i]    its TTL in ms (the job's lease TTL)
-- Returns     the number of slots renewed
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n, longest = 0, 0
for i = 1, #ARGV, 2 do
  local ttl = tonumber(ARGV[i + 1])
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', nowms + ttl, ARGV[i])
    n = n + 1
    if ttl > longest then
      longest = ttl
    end
  end
end
if longest > 0 and redis.call('PTTL', KEYS[1]) < longest then
  redis.call('PEXPIRE', KEYS[1], longest)
end
return n
