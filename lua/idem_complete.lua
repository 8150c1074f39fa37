-- idem_complete.lua: record the outcome of an attempt and end its lease in
-- one step, for the lease holder only. It checks the lease itself, like the
-- fence prelude (same KEYS[1], ARGV[1], ARGV[2]), and answers -1 like it when
-- the caller does not hold the lease, with one exception: when the record
-- already holds this fence's outcome, an earlier send of a finish of this
-- attempt wrote it (and deleted the lease) and its answer was lost: the
-- resend answers 1 when the stored outcome is the one asked for (same state,
-- same result) and -3 when it is another, writing nothing either way. Fences
-- are unique to one acquisition of a key, so nobody else can have written
-- that record.
-- Used for COMPLETED (a result) and for FAILED (a terminal error, cached like a
-- result). Record value layout: see idem_claim.lua. It writes no history
-- (the store sends it only without one): a history entry the PROCESSING
-- record carries is dropped with it.
--
-- KEYS[1]   lease key (deleted when ARGV[13] is "1"; otherwise the caller
--           releases it through its lease Manager)
-- KEYS[2]   heartbeat details key (deleted when ARGV[11] is "1")
-- KEYS[3]   external result key (written when ARGV[10] is "1")
-- KEYS[4]   record bucket of the claim's window (its PROCESSING record is removed)
-- KEYS[5..] record buckets of consecutive windows, the first being ARGV[6]
-- ARGV[1]   owner token
-- ARGV[2]   fence, as a decimal string
-- ARGV[3]   record field (16 bytes)
-- ARGV[4]   payload fingerprint (8 bytes)
-- ARGV[5]   attempt number
-- ARGV[6]   window index of KEYS[5]
-- ARGV[7]   window length in milliseconds
-- ARGV[8]   retention in milliseconds
-- ARGV[9]   state: 3 completed, 4 failed
-- ARGV[10]  "1": the result goes to KEYS[3]; "0": inline in the record
-- ARGV[11]  "1": delete the heartbeat details
-- ARGV[12]  result (or terminal error text)
-- ARGV[13]  "1": delete the lease key
-- Returns   1 written (or this outcome already written by this fence), -1
--           lease lost (nothing written), -2 the windows passed do not cover
--           Redis time, -3 another outcome already written by this fence
--           (nothing written)
local owner = redis.call('GET', KEYS[1])
local want = ARGV[1] .. ' ' .. ARGV[2] .. ' '
if not owner or string.sub(owner, 1, #want) ~= want then
  local fence, want = tonumber(ARGV[2]), tonumber(ARGV[9])
  for k = 5, #KEYS do
    local v = redis.call('HGET', KEYS[k], ARGV[3])
    if v and #v >= 22 then
      local st, f = struct.unpack('>BI7', v)
      local off = 19
      if st >= 32 then
        off = 21 + struct.unpack('>I2', v, 19)
      end
      if f == fence and st % 16 >= 3 and #v >= off + 3 then
        local res = string.sub(v, off + 4)
        if st % 32 >= 16 then
          res = redis.call('GET', KEYS[3])
        end
        if st % 16 == want and res == ARGV[12] then
          return 1
        end
        return -3
      end
    end
  end
  return -1
end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local wlen = tonumber(ARGV[7])
local base = tonumber(ARGV[6])
local cw = math.floor(nowms / wlen)
if cw < base or cw > base + #KEYS - 5 then
  return -2
end
local expat = (cw + 1) * wlen + tonumber(ARGV[8])
local st = tonumber(ARGV[9])
local res = ARGV[12]
if ARGV[10] == '1' then
  st = st + 16
  redis.call('SET', KEYS[3], res, 'PXAT', expat)
  res = ''
end
local b = KEYS[5 + cw - base]
redis.call('HSET', b, ARGV[3], struct.pack('>BI7c8I2I4', st, tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5]), sec) .. res)
if KEYS[4] ~= b then
  -- The claim's bucket already expires at expat or later when it is b.
  -- Another layout's records may share b: its expiry is only raised.
  local ttl = redis.call('PTTL', b)
  if ttl < 0 or nowms + ttl < expat then
    redis.call('PEXPIREAT', b, expat)
  end
  redis.call('HDEL', KEYS[4], ARGV[3])
end
if ARGV[13] == '1' then
  redis.call('DEL', KEYS[1])
end
if ARGV[11] == '1' then
  redis.call('DEL', KEYS[2])
end
return 1
