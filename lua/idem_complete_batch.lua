-- idem_complete_batch.lua: idem_complete.lua for many attempts in one call
-- (a plain script), so that the per-call cost of a script is paid once per
-- batch. Each entry carries its own fence check, the same as
-- idem_complete.lua's: it writes only when its lease key is held with its
-- token and fence, and, when the record already holds the entry's fence's
-- outcome (an earlier send whose answer was lost wrote it), answers 1 if it
-- is the one asked for (same state and result) and -3 if not, writing
-- nothing. On a Cluster every key of one call must be in one slot (the caller
-- groups them). Record value layout: see idem_claim.lua.
--
-- With W = ARGV[4] windows passed, entry i (from 0) uses the keys from
-- KEYS[i*(5+W)+1] (a full call, ARGV[7] "0"):
--   +1        lease key (read with GETDEL, so deleted, when the entry's
--             delete flag is "1")
--   +2        heartbeat details key (deleted when the entry's details flag is "1")
--   +3        external result key (written when the entry's external flag is "1")
--   +4        record bucket of the claim's window (its PROCESSING record is removed)
--   +5..+4+W  record buckets of consecutive windows, the first being ARGV[1]
--   +5+W      the key's attempt history (list; entry layout: idem_history.lua)
-- A short call (ARGV[7] "1") passes two keys an entry, from KEYS[i*2+1]:
-- the lease key and the bucket of the claim's window, which must be the
-- window of Redis time, ARGV[1] (W is then 1). The caller sends an entry
-- so only when it needs no other key: no external result, no details to
-- delete, and no history list to write (the record carries the entry, or
-- there is no history). An entry that finds its lease not held (the
-- windows are read to find an outcome written by an earlier send), or the
-- window moved on, or that needs another key, answers -4 and writes
-- nothing: the caller sends it again in a full call. Redis parses and
-- copies each key a call passes: nearly every completion passes 2 keys
-- instead of 6.
-- The arguments ARGV[8+i*2] and ARGV[9+i*2]: the entry's fixed fields
-- packed in one string (idempotency/finish.go's completeEntry), then the
-- result. The packed string, by byte (from 1):
--   1       state (3 completed, 4 failed)
--   2..4    external, details and delete-lease flags (each 1 or 0)
--   5       how the attempt's history entry ends (1 completed, 2 failed)
--   6       0
--   7..26   the head of the record to write ('>BI7c8I2I2'): its state byte
--           (the state, +16 with the external flag, +32 when it carries
--           the history entry), fence, payload fingerprint, attempt, and
--           the length of what follows the head when it carries the entry
--           (the entry, its end time, its end, the completion time), else 0
--   27..    the history entry the PROCESSING record carries, as the claim
--           wrote it (binary: idempotency/history.go), when the record to
--           write carries it (the length above less 6 and the end's length)
--   then    the record field (16 bytes), and the lease value's prefix that
--           the fence check compares ("<owner token> <fence> "), to the end
-- The record to write is the head (and the entry) as sent, then what only
-- Redis knows (its time): the string is cut, not unpacked and packed again
-- (struct.pack and struct.unpack cost Redis more than string.sub), and no
-- value the usual completion does not use is made into a Lua value.
-- ARGV[1]   window index of the first window bucket of each entry
-- ARGV[2]   window length in milliseconds
-- ARGV[3]   retention in milliseconds
-- ARGV[4]   number of windows passed per entry
-- ARGV[5]   the most attempts a history keeps; 0: no history is written
-- ARGV[6]   history TTL in milliseconds (the record's retention)
-- ARGV[7]   "1": a short call (above); "0": a full call
-- An entry that writes its outcome ends its attempt's history entry with
-- Redis time (the owner's account replaces a takeover's taken_over). When
-- the PROCESSING record carries the entry (a first attempt: see
-- idem_claim.lua), the caller sends it back and the outcome's record
-- carries it on, ended (the record is not read: the lease held under the
-- entry's fence means no one else wrote it; a resend of an outcome already
-- written ends it again), and the list is not touched; otherwise the
-- list's last entry is read first (it is the attempt's unless another
-- started since), the list searched from its end otherwise.
-- Returns   one code per entry: 1 written (or this outcome already written
--           by this fence), -1 lease lost (nothing written), -2 the windows
--           passed do not cover Redis time (nothing written), -3 another
--           outcome already written by this fence (nothing written), -4 a
--           short call's entry needs the full keys (nothing written)
local t = redis.call('TIME')
local sec = tonumber(t[1])
local nowms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local base = tonumber(ARGV[1])
local wlen = tonumber(ARGV[2])
local nw = tonumber(ARGV[4])
local endpack = struct.pack('>I6', nowms)
local secpack = struct.pack('>I4', sec) -- packed once a call, not once an entry
local cw = math.floor(nowms / wlen)
local expat = (cw + 1) * wlen + tonumber(ARGV[3])
local skew = cw < base or cw > base + nw - 1
local hmax = tonumber(ARGV[5])
local short = ARGV[7] == '1'

local function decoded(v, f)
  if not v then
    return nil
  end
  local ok, e = pcall(cjson.decode, v)
  if ok and type(e) == 'table' and e.f == f then
    return e
  end
  return nil
end

-- openLast: the history's last entry, v, is the open entry of fence f (no
-- end yet), checked on its JSON text. Sound because the entries are cjson's
-- or idem_claim.lua's compact JSON, whose string values escape every '"':
-- the texts '"f":"<f>"' and '"x":' occur only as the entry's own members
-- (the compensation steps in c have no f or x).
local function openLast(v, f)
  return v and string.byte(v, -1) == 125 and string.find(v, '"f":"' .. f .. '"', 1, true) ~= nil
    and string.find(v, '"x":', 1, true) == nil
end

-- historyEnd ends the entry of fence f in history list hk as x. The usual
-- case, the last entry open, is ended by appending e and x to its text
-- (a decode and an encode cost Redis about four times as much).
local function historyEnd(hk, f, x)
  local last = redis.call('LINDEX', hk, -1)
  if openLast(last, f) then
    redis.call('LSET', hk, -1, string.sub(last, 1, -2) .. ',"e":' .. string.format('%.0f', nowms)
      .. ',"x":' .. cjson.encode(x) .. '}')
    redis.call('PEXPIRE', hk, ARGV[6])
    return
  end
  local i, e = -1, decoded(last, f)
  if not e then
    i = nil
    local list = redis.call('LRANGE', hk, 0, -1)
    for j = #list - 1, 1, -1 do
      e = decoded(list[j], f)
      if e then
        i = j - 1
        break
      end
    end
  end
  e = e or {f = f}
  if e.x == nil or e.x == 'taken_over' then
    e.x, e.e = x, nowms
  end
  if i then
    redis.call('LSET', hk, i, cjson.encode(e))
  else
    redis.call('RPUSH', hk, cjson.encode(e))
    redis.call('LTRIM', hk, -hmax, -1)
  end
  redis.call('PEXPIRE', hk, ARGV[6])
end

-- restore puts back the lease value v of another owner that GETDEL took
-- from key k, with that owner's TTL from the value ('<token> <fence> <ttl
-- ms>', lease/'s layout): its expiry then lies at or past where its holder
-- had it (the holder's deadline is at most its last renewal + its ttl), as
-- when the renewer answers a GETEX that found another holder. A value
-- without a readable TTL is not a lease of that layout: it goes back with
-- the retention as its TTL, so that it does not stay forever.
local function restore(k, v)
  local ttl = tonumber(string.match(v, '^%S+ %S+ (%d+)'))
  if not ttl or ttl < 1 then
    ttl = tonumber(ARGV[3])
  end
  redis.call('SET', k, v, 'PX', ttl)
end

local ends = {'completed', 'failed'}

local function complete(k, p, res)
  local st, ext, det, del, xend = string.byte(p, 1, 5)
  local x = ends[xend]
  local hi, lo = string.byte(p, 25, 26)
  local m = hi * 256 + lo
  local n = 0 -- the carried entry's length
  if m > 0 then
    n = m - 6 - #x
  end
  if short and (ext == 1 or det == 1 or cw ~= base or hmax > 0 and x and m == 0) then
    return -4
  end
  -- An entry that deletes its lease reads it with GETDEL: the usual
  -- completion, whose lease is held, so sends one command fewer than GET
  -- and DEL. A lease found held by another owner is put back at once (same
  -- script, so no one sees it gone: restore below).
  local taken = del == 1 and not skew
  local owner
  if taken then
    owner = redis.call('GETDEL', KEYS[k])
  else
    owner = redis.call('GET', KEYS[k])
  end
  -- The lease value starts with the prefix sent (a plain find).
  if not owner or string.find(owner, string.sub(p, 43 + n), 1, true) ~= 1 then
    if owner and taken then
      restore(KEYS[k], owner)
    end
    if short then
      return -4
    end
    local field, fence = string.sub(p, 27 + n, 42 + n), struct.unpack('>I7', p, 8)
    for w = k + 4, k + 3 + nw do
      local v = redis.call('HGET', KEYS[w], field)
      if v and #v >= 22 then
        local vst, f = struct.unpack('>BI7', v)
        local off = 19
        if vst >= 32 then
          off = 21 + struct.unpack('>I2', v, 19)
        end
        if f == fence and vst % 16 >= 3 and #v >= off + 3 then
          local stored = string.sub(v, off + 4)
          if vst % 32 >= 16 then
            stored = redis.call('GET', KEYS[k + 2])
          end
          if vst % 16 == st and stored == res then
            return 1
          end
          return -3
        end
      end
    end
    return -1
  end
  if skew then
    return -2
  end
  if ext == 1 then
    redis.call('SET', KEYS[k + 2], res, 'PXAT', expat)
    res = ''
  end
  local cb, b -- the claim's bucket, this window's
  if short then
    cb = KEYS[k + 1]
    b = cb
  else
    cb, b = KEYS[k + 3], KEYS[k + 4 + cw - base]
  end
  -- The record carries the attempt's history entry, ended here, when the
  -- claim's record carried it (the head says so). One concatenation makes
  -- the record.
  local carry = m > 0
  local rec
  if carry then
    rec = string.sub(p, 7, 26 + n) .. endpack .. x .. secpack .. res
  else
    rec = string.sub(p, 7, 24) .. secpack .. res
  end
  local field = string.sub(p, 27 + n, 42 + n)
  redis.call('HSET', b, field, rec)
  if cb ~= b then
    -- The claim's bucket already expires at expat or later when it is b.
    -- Another layout's records may share b: its expiry is only raised.
    local ttl = redis.call('PTTL', b)
    if ttl < 0 or nowms + ttl < expat then
      redis.call('PEXPIREAT', b, expat)
    end
    redis.call('HDEL', cb, field)
  end
  if det == 1 then
    redis.call('DEL', KEYS[k + 1])
  end
  if hmax > 0 and x and not carry then
    historyEnd(KEYS[k + 4 + nw], string.format('%.0f', struct.unpack('>I7', p, 8)), x)
  end
  return 1
end

local out = {}
local per = 5 + nw
if short then
  per = 2
end
for i = 0, (#ARGV - 7) / 2 - 1 do
  out[i + 1] = complete(i * per + 1, ARGV[8 + i * 2], ARGV[9 + i * 2])
end
return out
