-- complete_record.lua: a prototype of idem_complete_batch.lua for records
-- that carry their lease (see claim_record.lua). Only for bench/recordlease.
-- An entry writes its outcome only when the claim's bucket still holds its
-- PROCESSING record with its token and fence and a deadline not passed (the
-- lease check); a resend of an outcome already written by the same fence
-- answers 1 (same outcome) or -3 (another), as in idem_complete_batch.lua.
--
-- Entry i (from 0) uses KEYS from i*(3+W)+1: details key, result key, the
-- claim's bucket, then W record buckets of consecutive windows, the first
-- being ARGV[1]; and ARGV from 5+i*9: owner token, fence, field, fingerprint,
-- attempt, state (3 or 4), external flag, details flag, result.
-- ARGV[1] first window, ARGV[2] window ms, ARGV[3] retention ms, ARGV[4] W.
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local base = tonumber(ARGV[1])
local wlen = tonumber(ARGV[2])
local nw = tonumber(ARGV[4])
local cw = math.floor(nowms / wlen)
local expat = (cw + 1) * wlen + tonumber(ARGV[3])
local skew = cw < base or cw > base + nw - 1

local function complete(k, a)
  local fence = tonumber(ARGV[a + 1])
  local v = redis.call('HGET', KEYS[k + 2], ARGV[a + 2])
  if not v then
    -- A resend after the outcome moved to a later window's bucket.
    for w = k + 3, k + 2 + nw do
      v = redis.call('HGET', KEYS[w], ARGV[a + 2])
      if v then
        break
      end
    end
  end
  if not v or #v < 22 then
    return -1
  end
  local st, f = struct.unpack('>BI7', v)
  if f ~= fence then
    return -1
  end
  if st % 16 >= 3 then
    local res = string.sub(v, 23)
    if st >= 16 then
      res = redis.call('GET', KEYS[k + 1])
    end
    if st % 16 == tonumber(ARGV[a + 5]) and res == ARGV[a + 8] then
      return 1
    end
    return -3
  end
  if st ~= 1 or #v < 24 or struct.unpack('>I6', v, 19) <= nowms or string.sub(v, 25) ~= ARGV[a] then
    return -1
  end
  if skew then
    return -2
  end
  local state = tonumber(ARGV[a + 5])
  local res = ARGV[a + 8]
  if ARGV[a + 6] == '1' then
    state = state + 16
    redis.call('SET', KEYS[k + 1], res, 'PXAT', expat)
    res = ''
  end
  local b = KEYS[k + 3 + cw - base]
  redis.call('HSET', b, ARGV[a + 2],
    struct.pack('>BI7c8I2I4', state, fence, ARGV[a + 3], tonumber(ARGV[a + 4]), sec) .. res)
  if KEYS[k + 2] ~= b then
    redis.call('PEXPIREAT', b, expat)
    redis.call('HDEL', KEYS[k + 2], ARGV[a + 2])
  end
  if ARGV[a + 7] == '1' then
    redis.call('DEL', KEYS[k])
  end
  return 1
end

local out = {}
local per = 3 + nw
for i = 0, (#ARGV - 4) / 9 - 1 do
  out[i + 1] = complete(i * per + 1, 5 + i * 9)
end
return out
