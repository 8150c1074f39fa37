-- renew_record.lua: how the renewer would extend a lease that lives in the
-- record (claim_record.lua's layout) instead of a lease key. Only for
-- bench/recordlease: it measures that renewal beside the renewer's one
-- GETEX a lease key and a pipelined PEXPIRE. An entry renews only when the
-- claim's bucket holds the key's PROCESSING record with the entry's token and
-- fence and a deadline not passed; the record is rewritten with the new
-- deadline (now + TTL), the rest kept.
--
-- Entry i (from 0): KEYS[i+1] the claim's bucket; ARGV from 1+i*4: field,
-- owner token, fence (decimal), lease TTL in milliseconds.
-- Returns   one code per entry: 1 renewed, 0 not held (nothing written).
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 0, #KEYS - 1 do
  local a = 1 + i * 4
  local v = redis.call('HGET', KEYS[i + 1], ARGV[a])
  local ok = 0
  if v and #v >= 24 and string.byte(v, 1) == 1 and string.sub(v, 25) == ARGV[a + 1] then
    local _, fen = struct.unpack('>BI7', v)
    if fen == tonumber(ARGV[a + 2]) and struct.unpack('>I6', v, 19) > nowms then
      redis.call('HSET', KEYS[i + 1], ARGV[a],
        string.sub(v, 1, 18) .. struct.pack('>I6', nowms + tonumber(ARGV[a + 3])) .. string.sub(v, 25))
      ok = 1
    end
  end
  out[i + 1] = ok
end
return out
