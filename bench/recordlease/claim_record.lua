-- claim_record.lua: a prototype of idem_claim.lua whose record carries its
-- lease (owner token and deadline) instead of a lease key beside it. Only for
-- bench/recordlease: it measures what that layout would save; the library
-- does not run it. It keeps idem_claim.lua's answers for the cases measured
-- (acquired, takeover after the deadline, held, duplicate, mismatch) and its
-- fence rule (max(previous + 1, server time in microseconds)); it leaves out
-- other layouts' buckets and the corrupt-record checks.
--
-- PROCESSING record: '>BI7c8I2' header (state 1, fence, fingerprint,
-- attempt), deadline in unix milliseconds ('>I6'), then the owner token.
--
-- Entry i (from 0) uses KEYS from i*(2+W)+1: details key, result key, then W
-- record buckets of consecutive windows, the first being ARGV[1]; and ARGV
-- from 6+i*4: field, fingerprint, owner token, lease TTL in milliseconds.
-- ARGV[1] first window, ARGV[2] window ms, ARGV[3] earlier windows kept,
-- ARGV[4] retention ms, ARGV[5] W.
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = sec * 1000000 + tonumber(t[2])
local base = tonumber(ARGV[1])
local wlen = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local nw = tonumber(ARGV[5])
local cw = math.floor(nowms / wlen)
local expat = (cw + 1) * wlen + tonumber(ARGV[4])
local skew = cw - keep < base or cw > base + nw - 1

local function claim(k, a)
  if skew then
    return {6, cw}
  end
  local field, fp = ARGV[a], ARGV[a + 1]
  local rec, rkey
  for w = cw, cw - keep, -1 do
    local v = redis.call('HGET', KEYS[k + 2 + w - base], field)
    if v then
      rec = v
      rkey = KEYS[k + 2 + w - base]
      break
    end
  end
  local prev, att, state = 0, 0, 0
  if rec then
    local st, fen, rfp, ra = struct.unpack('>BI7c8I2', rec)
    state = st % 16
    if state >= 3 then
      if rfp ~= fp then
        return {5, rec, false}
      end
      return {4, rec, false}
    end
    if rfp ~= fp then
      return {5, rec, false}
    end
    if state == 1 then
      local deadline = struct.unpack('>I6', rec, 19)
      if deadline > nowms then
        return {3, string.sub(rec, 25), deadline - nowms}
      end
    end
    prev = fen
    att = ra
  end
  local fence = nowus
  if prev + 1 > fence then
    fence = prev + 1
  end
  if att < 65535 then
    att = att + 1
  end
  local b = KEYS[k + 2 + cw - base]
  redis.call('HSET', b, field,
    struct.pack('>BI7c8I2I6', 1, fence, fp, att, nowms + tonumber(ARGV[a + 3])) .. ARGV[a + 2])
  redis.call('PEXPIREAT', b, expat)
  if rkey and rkey ~= b then
    redis.call('HDEL', rkey, field)
  end
  local details = false
  local code = 1
  if rec then
    details = redis.call('GET', KEYS[k])
    if state == 1 then
      code = 2
    end
  end
  -- Packed as the shipped idem_claim.lua packs a claim that runs the job.
  if details then
    return struct.pack('>BI7I2I7I7BB', code, fence, att, prev, cw, 0, 1) .. details
  end
  return struct.pack('>BI7I2I7I7BB', code, fence, att, prev, cw, 0, 0)
end

local out = {}
local per = 2 + nw
for i = 0, (#ARGV - 5) / 4 - 1 do
  out[i + 1] = claim(i * per + 1, 6 + i * 4)
end
return out
