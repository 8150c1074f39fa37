-- idem_release.lua (fenced): end an attempt without an outcome, so that the key
-- can run again (retryable failure) or only after a hold (keep). The attempt
-- count is kept in the record; heartbeat details are kept for the next attempt.
-- The fence prelude has already checked KEYS[1] against ARGV[1] and ARGV[2].
-- Record value layout: see idem_claim.lua.
--
-- KEYS[1]   lease key (deleted when ARGV[7] is "1"; otherwise the caller
--           releases it through its lease Manager)
-- KEYS[2]   record bucket of the claim's window (holds the PROCESSING record)
-- ARGV[1]   owner token, ARGV[2] fence (prelude)
-- ARGV[3]   record field (16 bytes)
-- ARGV[4]   payload fingerprint (8 bytes)
-- ARGV[5]   attempt number
-- ARGV[6]   hold in milliseconds: 0 = the next claim may run at once; otherwise
--           claims answer held until the hold has passed
-- ARGV[7]   "1": delete the lease key
-- Returns   1 released, -1 lease lost (prelude)
local v = struct.pack('>BI7c8I2', 2, tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5]))
local hold = tonumber(ARGV[6])
if hold > 0 then
  local t = redis.call('TIME')
  v = v .. struct.pack('>I6', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + hold)
end
redis.call('HSET', KEYS[2], ARGV[3], v)
if ARGV[7] == '1' then
  redis.call('DEL', KEYS[1])
end
return 1
