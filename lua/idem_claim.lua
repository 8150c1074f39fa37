-- idem_claim.lua: claim one or more idempotency keys, each in one step (a
-- plain script). Per key it reads the stored record, compares the payload
-- fingerprint, checks the lease and, when the key may run, creates the lease
-- (lease/ layout) and writes the PROCESSING record. A batch shares one call
-- so that the per-call cost of a script is paid once; on a Cluster every key
-- of one call must be in one slot (the caller groups them).
--
-- Record value (big-endian, struct format '>BI7c8I2', 18 bytes, then by state):
--   state byte (1 processing, 2 released, 3 completed, 4 failed; +16 when the
--   result lives in the external result key), fence (7 bytes), fingerprint
--   (8 bytes), attempt (2 bytes); completed/failed: + unix seconds (4 bytes) +
--   inline result; released: + optional hold-until unix milliseconds (6 bytes).
--
-- With W = ARGV[5] windows and O = ARGV[6] other buckets passed, entry i
-- (from 0) uses the keys from KEYS[i*(3+W+O)+1]:
--   +1            lease key: hash with tok (owner token) and fen (fence), PX = the entry's lease TTL
--   +2            heartbeat details key (string), read back on a retry or a takeover
--   +3            external result key (string), read when the record's result lives there
--   +4..+3+W      record buckets (hashes) of consecutive windows, the first being ARGV[1]
--   +4+W..+3+W+O  buckets of other layouts (another retention or window count) whose
--                 records may still live: read when the key has no record in the
--                 windows above; a record found there is replayed, or moved into
--                 the current window when the key runs again
-- and the arguments ARGV[7+i*4] to ARGV[10+i*4]: record field (16-byte hash
-- of the key), payload fingerprint (8 bytes), owner token for a new lease,
-- lease TTL in milliseconds (each entry has its own: job types differ).
-- ARGV[1]   window index of the first bucket of each entry
-- ARGV[2]   window length in milliseconds
-- ARGV[3]   number of earlier windows still inside the retention
-- ARGV[4]   retention in milliseconds
-- ARGV[5]   number of windows passed per entry
-- ARGV[6]   number of other layouts' buckets passed per entry
-- Returns   one reply per entry, in order:
--           {1, fence, attempt, 0, details, window}              acquired
--           {2, fence, attempt, previous fence, details, window} takeover
--           {3, owner token, remaining ms}                       held
--           {4, record, external result}                         duplicate
--           {5, record, external result}                         fingerprint mismatch
--           {6, window}                                          the windows passed do not cover Redis time
--           {7, record}                                          the stored record is corrupt (shorter than
--                                                                its 18-byte header, an unknown state or
--                                                                flag, a fence above 2^53): nothing is written
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = sec * 1000000 + tonumber(t[2])
local base = tonumber(ARGV[1])
local wlen = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local retention = tonumber(ARGV[4])
local nw = tonumber(ARGV[5])
local no = tonumber(ARGV[6])
local cw = math.floor(nowms / wlen)
local expat = (cw + 1) * wlen + retention
local skew = cw - keep < base or cw > base + nw - 1

local function claim(k, a)
  if skew then
    return {6, cw}
  end
  local field, fp = ARGV[a], ARGV[a + 1]
  local rec, rkey
  for w = cw, cw - keep, -1 do
    local v = redis.call('HGET', KEYS[k + 3 + w - base], field)
    if v then
      rec = v
      rkey = KEYS[k + 3 + w - base]
      break
    end
  end
  if not rec then
    for j = k + 3 + nw, k + 2 + nw + no do
      local v = redis.call('HGET', KEYS[j], field)
      if v then
        rec = v
        rkey = KEYS[j]
        break
      end
    end
  end
  local prev, att, state = 0, 0, 0
  if rec then
    -- A record damaged outside this library is reported, never unpacked past
    -- its end (struct.unpack raises an error on a short value).
    if #rec < 18 then
      return {7, rec}
    end
    local st, fen, rfp, ra = struct.unpack('>BI7c8I2', rec)
    state = st % 16
    if state < 1 or state > 4 or st >= 32 or fen >= 9007199254740992 then
      return {7, rec}
    end
    if state >= 3 then
      local ext = false
      if st >= 16 then
        ext = redis.call('GET', KEYS[k + 2])
      end
      if rfp ~= fp then
        return {5, rec, ext}
      end
      return {4, rec, ext}
    end
    if rfp ~= fp then
      return {5, rec, false}
    end
    if state == 2 and #rec >= 24 then
      local hold = struct.unpack('>I6', rec, 19)
      if hold > nowms then
        return {3, '', hold - nowms}
      end
    end
    prev = fen
    att = ra
  end
  local owner = redis.call('HGET', KEYS[k], 'tok')
  if owner then
    return {3, owner, redis.call('PTTL', KEYS[k])}
  end
  local fence = nowus
  if prev + 1 > fence then
    fence = prev + 1
  end
  if att < 65535 then
    att = att + 1
  end
  redis.call('HSET', KEYS[k], 'tok', ARGV[a + 2], 'fen', string.format('%.0f', fence))
  redis.call('PEXPIRE', KEYS[k], ARGV[a + 3])
  local b = KEYS[k + 3 + cw - base]
  redis.call('HSET', b, field, struct.pack('>BI7c8I2', 1, fence, fp, att))
  redis.call('PEXPIREAT', b, expat)
  if rkey and rkey ~= b then
    redis.call('HDEL', rkey, field)
  end
  local details = false
  local code = 1
  if rec then
    details = redis.call('GET', KEYS[k + 1])
    if state == 1 then
      code = 2
    end
  end
  return {code, fence, att, prev, details, cw}
end

local out = {}
local per = 3 + nw + no
for i = 0, (#ARGV - 6) / 4 - 1 do
  out[i + 1] = claim(i * per + 1, 7 + i * 4)
end
return out
