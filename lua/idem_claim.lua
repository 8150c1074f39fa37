-- idem_claim.lua: claim an idempotency key in one step (plain script; every key
-- shares the record's Cluster hash tag, so the script touches one slot).
-- Checks the stored record, compares the payload fingerprint, checks the lease
-- and, when the key may run, creates the lease (lease/ layout) and writes the
-- PROCESSING record.
--
-- Record value (big-endian, struct format '>BI7c8I2', 18 bytes, then by state):
--   state byte (1 processing, 2 released, 3 completed, 4 failed; +16 when the
--   result lives in the external result key), fence (7 bytes), fingerprint
--   (8 bytes), attempt (2 bytes); completed/failed: + unix seconds (4 bytes) +
--   inline result; released: + optional hold-until unix milliseconds (6 bytes).
--
-- KEYS[1]   lease key: hash with tok (owner token) and fen (fence), PX = lease TTL
-- KEYS[2]   heartbeat details key (string), read back on a retry or a takeover
-- KEYS[3]   external result key (string), read when the record's result lives there
-- KEYS[4..] record buckets (hashes) of consecutive windows, the first being ARGV[5]
-- ARGV[1]   record field: 16-byte hash of the idempotency key
-- ARGV[2]   payload fingerprint, 8 bytes
-- ARGV[3]   owner token for the new lease
-- ARGV[4]   lease TTL in milliseconds
-- ARGV[5]   window index of KEYS[4]
-- ARGV[6]   window length in milliseconds
-- ARGV[7]   number of earlier windows still inside the retention
-- ARGV[8]   retention in milliseconds
-- Returns   {1, fence, attempt, 0, details, window}          acquired
--           {2, fence, attempt, previous fence, details, window} takeover
--           {3, owner token, remaining ms}                   held
--           {4, record, external result}                     duplicate
--           {5, record, external result}                     fingerprint mismatch
--           {6, window}                                      the windows passed do not cover Redis time
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local wlen = tonumber(ARGV[6])
local base = tonumber(ARGV[5])
local keep = tonumber(ARGV[7])
local cw = math.floor(nowms / wlen)
if cw - keep < base or cw > base + #KEYS - 4 then
  return {6, cw}
end
local field = ARGV[1]
local rec, rw
for w = cw, cw - keep, -1 do
  local v = redis.call('HGET', KEYS[4 + w - base], field)
  if v then
    rec = v
    rw = w
    break
  end
end
local prev, att, state = 0, 0, 0
if rec then
  local st, fen, fp, a = struct.unpack('>BI7c8I2', rec)
  state = st % 16
  if state >= 3 then
    local ext = false
    if st >= 16 then
      ext = redis.call('GET', KEYS[3])
    end
    if fp ~= ARGV[2] then
      return {5, rec, ext}
    end
    return {4, rec, ext}
  end
  if fp ~= ARGV[2] then
    return {5, rec, false}
  end
  if state == 2 and #rec >= 24 then
    local hold = struct.unpack('>I6', rec, 19)
    if hold > nowms then
      return {3, '', hold - nowms}
    end
  end
  prev = fen
  att = a
end
local owner = redis.call('HGET', KEYS[1], 'tok')
if owner then
  return {3, owner, redis.call('PTTL', KEYS[1])}
end
local fence = sec * 1000000 + tonumber(t[2])
if prev + 1 > fence then
  fence = prev + 1
end
if att < 65535 then
  att = att + 1
end
redis.call('HSET', KEYS[1], 'tok', ARGV[3], 'fen', string.format('%.0f', fence))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local b = KEYS[4 + cw - base]
redis.call('HSET', b, field, struct.pack('>BI7c8I2', 1, fence, ARGV[2], att))
redis.call('PEXPIREAT', b, (cw + 1) * wlen + tonumber(ARGV[8]))
if rw and rw ~= cw then
  redis.call('HDEL', KEYS[4 + rw - base], field)
end
local details = false
local code = 1
if rec then
  details = redis.call('GET', KEYS[2])
  if state == 1 then
    code = 2
  end
end
return {code, fence, att, prev, details, cw}
