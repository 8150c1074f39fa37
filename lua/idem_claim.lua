-- idem_claim.lua: claim one or more idempotency keys, each in one step (a
-- plain script). Per key it reads the stored record, compares the payload
-- fingerprint, checks the lease and, when the key may run, creates the lease
-- (lease/ layout) and writes the PROCESSING record. A batch shares one call
-- so that the per-call cost of a script is paid once; on a Cluster every key
-- of one call must be in one slot (the caller groups them).
--
-- Record value (big-endian, struct format '>BI7c8I2', 18 bytes, then by state):
--   state byte (1 processing, 2 released, 3 completed, 4 failed; +16 when the
--   result lives in the external result key; +32 when the record carries its
--   attempt's history entry), fence (7 bytes), fingerprint (8 bytes), attempt
--   (2 bytes); with +32: the entry's length (2 bytes) and the entry (binary:
--   layout in idempotency/history.go; a record written before that form
--   carries the JSON text a history list keeps, idem_history.lua, whose
--   first byte is '{'); then completed/failed:
--   unix seconds (4 bytes) + inline result; released: optional hold-until unix
--   milliseconds (6 bytes).
--
-- The history entry of a key's first attempt is not written to the key's
-- history list: the claim of a key that has no record and no earlier fence
-- (its fence is then Redis time in microseconds, which the entry's start is
-- read from) keeps it in the PROCESSING record (+32), a release
-- keeps it in the RELEASED record and the completion ends it in the
-- COMPLETED or FAILED record, so that a job done at its first try writes no
-- list at all. A later claim of the key (a retry or a takeover), a reset, and
-- readers of the history move or merge it into the list: the list's own
-- fields (an end written by idem_history.lua, compensation steps) win.
--
-- With W = ARGV[5] windows and O = ARGV[6] other buckets passed, entry i
-- (from 0) uses the keys from KEYS[i*(5+W+O)+1] (a full call, ARGV[9] "0"):
--   +1            lease key (a string, lease_acquire.lua's layout), PX = the entry's lease TTL
--   +2            heartbeat details key (string), read back on a retry or a takeover
--   +3            external result key (string), read when the record's result lives there
--   +4..+3+W      record buckets (hashes) of consecutive windows, the first being ARGV[1]
--   +4+W..+3+W+O  buckets of other layouts (another retention or window count) whose
--                 records may still live: read when the key has no record in the
--                 windows above; a record found there is replayed, or moved into
--                 the current window when the key runs again
--   +4+W+O        the key's attempt history (list, <prefix>idem:h:<tag>:<key>;
--                 entry layout: idem_history.lua)
--   +5+W+O        the key's cancel mark (string, <prefix>idem:x:<tag>:<key>: the
--                 fence of the attempt an operator cancelled; lease_cancel.lua)
-- A short call (ARGV[9] "1") passes only the keys that the claim of a key
-- without a record, or of a finished one, needs, from KEYS[i*(2+W+O)+1]:
-- the lease key, the external result key, then the W windows' and the O
-- other buckets, as above. An entry that finds a record which needs the
-- other keys (a retry or a takeover would run, or a record outlived its
-- result key) answers {8} and writes nothing: the caller claims it again in
-- a full call. Nearly every claim is of a new key or a duplicate, and Redis
-- parses and copies each key a call passes (bench/luacost: lua_key_us): such
-- a claim passes 5 keys instead of 8.
-- The arguments ARGV[10+i*5] to ARGV[14+i*5]: record field (16-byte hash
-- of the key), payload fingerprint (8 bytes), owner token for a new lease,
-- lease TTL in milliseconds (each entry has its own: job types differ), and
-- the history entry of the attempt the claim starts, binary (owner digest,
-- worker, trace and span IDs, job type: layout in idempotency/history.go;
-- "" for none), which a record carries as it is and the list gets as JSON.
-- ARGV[1]   window index of the first bucket of each entry
-- ARGV[2]   window length in milliseconds
-- ARGV[3]   number of earlier windows still inside the retention
-- ARGV[4]   retention in milliseconds
-- ARGV[5]   number of windows passed per entry
-- ARGV[6]   number of other layouts' buckets passed per entry
-- ARGV[7]   the most attempts a history keeps; 0: no history is written
-- ARGV[8]   history TTL in milliseconds (the record's retention)
-- ARGV[9]   "1": a short call (above); "0": a full call
-- A claim that runs the job (acquired, takeover) of a key with a record
-- appends the attempt's start entry to the history (RPUSH, and LTRIM past
-- the bound: the list is not read); a takeover first ends the previous
-- fence's entry, if it has no end, as taken_over; the previous attempt's
-- entry carried in the record is moved to the list first. A claim of a key
-- without a record keeps the start entry in the record instead.
-- A completed or failed record whose result lives in the external result key,
-- gone, has expired: that key expired with the retention the record was
-- written with, and the record outlived it only in a bucket another layout
-- shares (window starts that coincide) and kept longer. The key runs again,
-- as after the record's expiry, above its fence. While other layouts are
-- live (O > 0) a bucket's expiry is only raised.
-- A claim after an attempt an operator cancelled, which ended before it
-- recorded the cancel (its lease lost: a takeover; or released for a retry
-- just before it learnt of the cancel), is covered by the cancel: the cancel
-- mark holds the record's fence. The mark moves to the new fence (its TTL
-- kept), so that a claim after this attempt is covered too, and the reply's
-- last element is 1; the claimant records the key as cancelled without
-- running the job. Fences are never reused, so a mark left from an earlier
-- life of the key (before a reset or the record's expiry) never matches.
-- Returns   one reply per entry, in order:
--           a string, acquired (code 1) or takeover (code 2): struct format
--             '>BI7I2I7I7BB' (26 bytes): code, fence, attempt, previous fence
--             or 0 (0: the record carries the attempt's history entry),
--             window, c (1: cancelled), d (1: heartbeat details follow);
--             then the details. A claim that runs the job
--             answers so because it is the one answer of nearly every entry:
--             Redis writes one string faster than a table of seven elements
--             (bench/luacost: lua_reply_packed_sent_us, lua_reply_table_sent_us)
--           {3, owner token, remaining ms}                       held
--           {4, record, external result}                         duplicate
--           {5, record, external result}                         fingerprint mismatch
--           {6, window}                                          the windows passed do not cover Redis time
--           {7, record}                                          the stored record is corrupt (shorter than
--                                                                its 18-byte header, an unknown state or
--                                                                flag, a fence above 2^53): nothing is written
--           {8}                                                  a short call's entry needs the full keys:
--                                                                nothing is written
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
local hmax = tonumber(ARGV[7])
local httl = ARGV[8]
local cw = math.floor(nowms / wlen)
local expat = (cw + 1) * wlen + retention
-- Numbers made text once a call, not once an entry: redis.call makes a
-- number argument text with a printf of its own, and a new key's fence is
-- nowus in every entry.
local expats = string.format('%.0f', expat)
local nowuss = string.format('%.0f', nowus)
local skew = cw - keep < base or cw > base + nw - 1
local short = ARGV[9] == '1'
-- What the new keys of a call share, packed once a call when the first one
-- needs it: the fence (nowus) as a record holds it, and the reply (code 1,
-- attempt 1, no previous fence, not cancelled, no details). struct.pack and
-- the strings it makes cost Redis more than the concatenation below.
local newFence, newReply

-- extend sets bucket b's expiry to at unless it already expires later:
-- layouts whose windows start at the same instants name the same buckets,
-- and a record must live for the retention it was written with.
local function extend(b, at)
  local ttl = redis.call('PTTL', b)
  if ttl < 0 or nowms + ttl < at then
    redis.call('PEXPIREAT', b, at)
  end
end

-- push appends entry text v to history list hk, trimmed to the bound, and
-- renews the list's TTL.
local function push(hk, v)
  if redis.call('RPUSH', hk, v) > hmax then
    redis.call('LTRIM', hk, -hmax, -1)
  end
  redis.call('PEXPIRE', hk, httl)
end

-- flush moves the entry of fence f (decimal text) into history list hk: tr,
-- when not nil, is the entry a record of attempt att, fence fn, carried
-- (its start is the fence's time), merged into
-- the list's entry of f (whose own fields win) or appended; over, on a
-- takeover, ends the entry as taken over when it has no end. A takeover is
-- rare: the list is searched from its end. (listEntry is entry_prelude.lua's,
-- which runs in front of this script.)
local function flush(hk, f, fn, tr, att, over)
  local e
  if tr then
    e = listEntry(tr, f, att, math.floor(fn / 1000))
  end
  local list = redis.call('LRANGE', hk, 0, -1)
  for i = #list, 1, -1 do
    local ok, l = pcall(cjson.decode, list[i])
    if ok and type(l) == 'table' and l.f == f then
      local changed = false
      for key, v in pairs(e or {}) do
        if l[key] == nil then
          l[key], changed = v, true
        end
      end
      if over and l.x == nil then
        l.e, l.x, l.to, changed = nowms, 'taken_over', 1, true
      end
      if changed then
        redis.call('LSET', hk, i - 1, cjson.encode(l))
      end
      return
    end
  end
  if not e then
    return
  end
  if over and e.x == nil then
    e.e, e.x, e.to = nowms, 'taken_over', 1
  end
  push(hk, cjson.encode(e))
end

-- held answers the claim of a key whose lease key, KEYS[k], is held.
local function held(k)
  return {3, string.match(redis.call('GET', KEYS[k]), '^%S*'), redis.call('PTTL', KEYS[k])}
end

-- claim claims the entry whose keys start at KEYS[k] and arguments at
-- ARGV[a].
local function claim(k, a)
  if skew then
    return {6, cw}
  end
  local kw, kr = k + 3, k + 2 -- the first window bucket, the external result key
  if short then
    kw, kr = k + 2, k + 1
  end
  local field, fp = ARGV[a], ARGV[a + 1]
  local rec, rkey
  for w = cw, cw - keep, -1 do
    local v = redis.call('HGET', KEYS[kw + w - base], field)
    if v then
      rec = v
      rkey = KEYS[kw + w - base]
      break
    end
  end
  if not rec then
    for j = kw + nw, kw + nw + no - 1 do
      local v = redis.call('HGET', KEYS[j], field)
      if v then
        rec = v
        rkey = KEYS[j]
        break
      end
    end
  end
  local prev, att, state = 0, 0, 0
  local tr, tra, off = nil, 0, 19 -- the record's history entry, its attempt; where its state's tail starts
  if rec then
    -- A record damaged outside this library is reported, never unpacked past
    -- its end (struct.unpack raises an error on a short value).
    if #rec < 18 then
      return {7, rec}
    end
    local st, fen, rfp, ra = struct.unpack('>BI7c8I2', rec)
    state = st % 16
    if state < 1 or state > 4 or st >= 64 or fen >= 9007199254740992 then
      return {7, rec}
    end
    if st >= 32 then
      -- The record carries its attempt's history entry: 2 bytes of length.
      local n = #rec >= 20 and struct.unpack('>I2', rec, 19) or 65536
      if #rec < 20 + n then
        return {7, rec}
      end
      tr, tra, off = string.sub(rec, 21, 20 + n), ra, 21 + n
    end
    local ext = false
    if state >= 3 and st % 32 >= 16 then
      ext = redis.call('GET', KEYS[kr])
    end
    if state >= 3 and st % 32 >= 16 and not ext then
      -- The result key has expired (with the retention of the layout
      -- that wrote it) while the record lives on in a bucket another
      -- layout's write kept longer: the record has expired too. The key
      -- runs again, as after any record's expiry, above its fence.
      if short then
        return {8}
      end
      rec, tr, state, prev = nil, nil, 0, fen
    else
      if rfp ~= fp then
        return {5, rec, ext}
      end
      if state >= 3 then
        return {4, rec, ext}
      end
      if state == 2 and #rec >= off + 5 then
        local hold = struct.unpack('>I6', rec, off)
        if hold > nowms then
          return {3, '', hold - nowms}
        end
      end
      if short then
        -- A retry or a takeover would run: it reads the details and the
        -- cancel mark and writes the history.
        if redis.call('EXISTS', KEYS[k]) == 1 then
          return held(k)
        end
        return {8}
      end
      prev = fen
      att = ra
    end
  end
  local fence = nowus
  if prev + 1 > fence then
    fence = prev + 1
  end
  local fs = fence == nowus and nowuss or string.format('%.0f', fence)
  -- Take the lease (lease_acquire.lua's layout) unless somebody holds it.
  if not redis.call('SET', KEYS[k], ARGV[a + 2] .. ' ' .. fs .. ' ' .. ARGV[a + 3], 'NX', 'PX', ARGV[a + 3]) then
    return held(k)
  end
  if att < 65535 then
    att = att + 1
  end
  local b = KEYS[kw + cw - base]
  local entry = hmax > 0 and ARGV[a + 4] ~= '' and ARGV[a + 4]
  -- Only a key without a record or an earlier fence carries its entry in
  -- its record: its fence is nowus, the entry's start.
  local carry = entry and prev == 0
  local v
  if prev == 0 and att == 1 and #fp == 8 then
    -- The usual claim, of a new key (no earlier fence: its fence is nowus):
    -- its record made in one concatenation, state 33 ('!') and the entry's
    -- length and the entry when it carries it, else state 1.
    newFence = newFence or struct.pack('>I7', nowus)
    if carry then
      local n = #entry
      v = '!' .. newFence .. fp .. '\0\1' .. string.char(math.floor(n / 256), n % 256) .. entry
    else
      v = '\1' .. newFence .. fp .. '\0\1'
    end
  elseif carry then
    v = struct.pack('>BI7c8I2I2', 33, fence, fp, att, #entry) .. entry
  else
    v = struct.pack('>BI7c8I2', 1, fence, fp, att)
  end
  if no > 0 then
    -- Other layouts are live: where their window starts coincide with
    -- ours, their records share this bucket. Its expiry is only raised.
    redis.call('HSET', b, field, v)
    extend(b, expat)
  elseif redis.call('HSET', b, field, v, '', expats) > (rkey == b and 0 or 1) then
    -- The bucket's mark, the field '' (never a record's: those are 16
    -- bytes), was not there: the bucket is new, or was deleted, evicted or
    -- lost and is written again, and its expiry is set now. HSET counts
    -- the fields it adds, and the record's field was in b only if the
    -- lookup above found it there (b is read first). So every bucket that
    -- holds the mark has its expiry (a script's writes replicate together),
    -- and a claim into it sends one command fewer than an HSET and a
    -- PEXPIREAT. The mark holds the expiry it was given.
    redis.call('PEXPIREAT', b, expats)
  end
  if rkey and rkey ~= b then
    redis.call('HDEL', rkey, field)
  end
  local details = false
  local code = 1
  local cancelled = 0
  if rec then
    details = redis.call('GET', KEYS[k + 1])
    if state == 1 then
      code = 2
    end
    local mk = KEYS[kw + nw + no + 1]
    if redis.call('GET', mk) == string.format('%.0f', prev) then
      redis.call('SET', mk, fs, 'KEEPTTL')
      cancelled = 1
    end
  end
  if entry and not carry then
    local hk = KEYS[kw + nw + no]
    if tr or code == 2 then
      flush(hk, string.format('%.0f', prev), prev, tr, tra, code == 2)
    end
    -- The list keeps JSON entries (idem_history.lua).
    local e = listEntry(entry, fs, att, nowms)
    if e then
      push(hk, cjson.encode(e))
    end
  end
  if details then
    return struct.pack('>BI7I2I7I7BB', code, fence, att, prev, cw, cancelled, 1) .. details
  end
  if not rec and prev == 0 then
    newReply = newReply or struct.pack('>BI7I2I7I7BB', 1, nowus, 1, 0, cw, 0, 0)
    return newReply
  end
  return struct.pack('>BI7I2I7I7BB', code, fence, att, prev, cw, cancelled, 0)
end

local out = {}
local per = 5 + nw + no
if short then
  per = 2 + nw + no
end
for i = 0, (#ARGV - 9) / 5 - 1 do
  out[i + 1] = claim(i * per + 1, 10 + i * 5)
end
return out
