-- limit_acquire.lua: take a running slot of a limit group for one job (a
-- plain script), after checking the group's hold-until (a handler's
-- Retry-After) and its rate. Redis TIME is the clock.
--
-- It runs in its own script, just before the job's claim (idem_claim.lua),
-- not inside it: the claim's keys are hash-tagged by the idempotency key
-- ({K}) and these by the limit group ({G}), two Redis Cluster slots that one
-- script cannot span. The worker gives the slot back (ZREM of ARGV[1]) when
-- the claim does not run the job (the key held elsewhere, a duplicate, an
-- error), and when the job ends. A slot whose holder died is pruned here
-- once its deadline passed: a kill -9 leaks a slot for one lease TTL at most.
--
-- KEYS[1]  slots: a sorted set, member = the job's key and the worker
--          instance ("key|instance"), score = the slot's deadline (Unix ms)
-- KEYS[2]  hold-until: a string (the hold's end, Unix ms) whose PTTL is the
--          hold left (limit_hold.lua)
-- KEYS[3]  rate: a string, the GCRA theoretical arrival time (Unix us)
-- ARGV[1]  member
-- ARGV[2]  the slot's TTL in ms (the job's lease TTL)
-- ARGV[3]  concurrency limit (0: none)
-- ARGV[4]  emission interval in microseconds (1e6 / jobs a second; 0: no rate)
-- ARGV[5]  burst: jobs that may start at once within the rate (>= 1)
-- Returns  {status, wait ms, running}; status:
--          1  acquired (or already held by this member: its deadline moves)
--          2  full: the group runs its limit; wait = until its earliest slot
--             deadline
--          3  held until a time: wait = the hold left
--          4  rate: wait = until the next job of the group may start
local hold = redis.call('PTTL', KEYS[2])
if hold > 0 then
  return {3, hold, redis.call('ZCARD', KEYS[1])}
end
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowms)
local running = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], nowms + ttl, ARGV[1])
  return {1, 0, running}
end
local limit = tonumber(ARGV[3])
if limit > 0 and running >= limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {2, math.max(tonumber(first[2]) - nowms, 1), running}
end
local interval = tonumber(ARGV[4])
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[3]) or '0')
  if tat < nowus then
    tat = nowus
  end
  local allow = tat - interval * (tonumber(ARGV[5]) - 1)
  if allow > nowus then
    return {4, math.max(math.ceil((allow - nowus) / 1000), 1), running}
  end
  tat = tat + interval
  redis.call('SET', KEYS[3], string.format('%.0f', tat), 'PX', math.ceil((tat - nowus) / 1000) + 1000)
end
redis.call('ZADD', KEYS[1], nowms + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {1, 0, running + 1}
