-- idem_release.lua: end an attempt without an outcome, so that the key can
-- run again (retryable failure) or only after a hold (keep), for the lease
-- holder only. The attempt count is kept in the record; heartbeat details are
-- kept for the next attempt. It checks the lease itself, like the fence
-- prelude (same KEYS[1], ARGV[1], ARGV[2]), and answers -1 like it when the
-- caller does not hold the lease, unless the record is already this fence's
-- RELEASED record: an earlier send of this same call wrote it (and deleted the
-- lease) and its answer was lost; the resend answers 1 and writes nothing.
-- Record value layout: see idem_claim.lua.
--
-- The RELEASED record goes into the bucket of the current window, with that
-- bucket's expiry, like a completion's outcome (and leaves the claim's
-- bucket): an attempt that ran past its claim window's end plus the
-- retention finds the claim's bucket expired, and a record written back
-- there would never expire and never be read by a claim again.
--
-- KEYS[1]   lease key (deleted when ARGV[7] is "1"; otherwise the caller
--           releases it through its lease Manager)
-- KEYS[2]   record bucket of the claim's window (holds the PROCESSING record)
-- KEYS[3..] record buckets of consecutive windows, the first being ARGV[8]
-- ARGV[1]   owner token
-- ARGV[2]   fence, as a decimal string
-- ARGV[3]   record field (16 bytes)
-- ARGV[4]   payload fingerprint (8 bytes)
-- ARGV[5]   attempt number
-- ARGV[6]   hold in milliseconds: 0 = the next claim may run at once; otherwise
--           claims answer held until the hold has passed
-- ARGV[7]   "1": delete the lease key
-- ARGV[8]   window index of KEYS[3]
-- ARGV[9]   window length in milliseconds
-- ARGV[10]  retention in milliseconds
-- Returns   1 released (or already released by this fence), -1 lease lost
--           (nothing written), -2 the windows passed do not cover Redis time
--           (nothing written)
local owner = redis.call('GET', KEYS[1])
local want = ARGV[1] .. ' ' .. ARGV[2] .. ' '
if not owner or string.sub(owner, 1, #want) ~= want then
  for i = 2, #KEYS do
    local r = redis.call('HGET', KEYS[i], ARGV[3])
    if r and #r >= 8 then
      local st, f = struct.unpack('>BI7', r)
      if st % 16 == 2 and f == tonumber(ARGV[2]) then
        return 1
      end
    end
  end
  return -1
end
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local base, wlen = tonumber(ARGV[8]), tonumber(ARGV[9])
local cw = math.floor(nowms / wlen)
if cw < base or cw > base + #KEYS - 3 then
  return -2
end
local b = KEYS[3 + cw - base]
-- The history entry the PROCESSING record carries (a first attempt) stays
-- in the RELEASED record, with its length, for the next claim to move.
local tr, st = '', 2
local cur = redis.call('HGET', KEYS[2], ARGV[3])
if cur and #cur >= 20 and string.byte(cur, 1) >= 32 then
  local _, f, _, _, n = struct.unpack('>BI7c8I2I2', cur)
  if f == tonumber(ARGV[2]) and #cur >= 20 + n then
    tr, st = string.sub(cur, 19, 20 + n), 34
  end
end
local v = struct.pack('>BI7c8I2', st, tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5])) .. tr
local hold = tonumber(ARGV[6])
if hold > 0 then
  v = v .. struct.pack('>I6', nowms + hold)
end
redis.call('HSET', b, ARGV[3], v)
-- Another layout's records may share b (idem_claim.lua): its expiry is only
-- raised.
local expat = (cw + 1) * wlen + tonumber(ARGV[10])
local ttl = redis.call('PTTL', b)
if ttl < 0 or nowms + ttl < expat then
  redis.call('PEXPIREAT', b, expat)
end
if KEYS[2] ~= b then
  redis.call('HDEL', KEYS[2], ARGV[3])
end
if ARGV[7] == '1' then
  redis.call('DEL', KEYS[1])
end
return 1
