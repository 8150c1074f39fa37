-- idem_reset.lua: forget the record of one idempotency key (an operator's
-- reset), so that the key's next delivery runs as a first claim: its record
-- (in every bucket a claim reads), its heartbeat details and its external
-- result are deleted. A live lease refuses the reset unless forced; forced,
-- the lease key is deleted too, so its holder's renewals and fenced writes
-- (commit, heartbeat details) find it gone and fail as lost.
--
-- The fence never goes backwards: a claim of a key without a record takes
-- the fence TIME in microseconds (idem_claim.lua), so the reset is refused
-- (status 3, nothing written) unless Redis time is already past every fence
-- the key had (its record's and its lease's). A later claim then gets a fence
-- above all of them, under the assumption the claim script already makes:
-- the server clock does not go back.
--
-- KEYS[1]   lease key (a string: lease_acquire.lua)
-- KEYS[2]   heartbeat details key (string)
-- KEYS[3]   external result key (string)
-- KEYS[4]   the key's attempt history (list; entry layout: idem_history.lua)
-- KEYS[5..] record buckets (hashes): every bucket a claim of the key may read
-- ARGV[1]   record field (16-byte hash of the key)
-- ARGV[2]   "1" to end a live lease, "0" to refuse
-- ARGV[3]   the most attempts a history keeps; 0: no history is written
-- ARGV[4]   history TTL in milliseconds
-- A record that carries its attempt's history entry (idem_claim.lua) has
-- it moved into the history list before it is deleted (merged into the
-- list's entry of its fence, whose own fields win), so that the history
-- outlives the reset.
-- Returns   {1, fence, state, lease ended (0/1)}  reset: fence is the highest the key had
--                                                  (0: none), state the record's (0: none,
--                                                  1..4 as in idem_claim.lua, -1 unreadable)
--           {2, remaining ms, lease fence}         refused: a lease is live and not forced
--           {3, fence, Redis time in µs}           refused: Redis time is not past the fence
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local field, force = ARGV[1], ARGV[2] == '1'
local hmax = tonumber(ARGV[3])

-- moveEntry merges history entry tr that a record of fence f (decimal
-- text, whose time is the entry's start) and attempt att carries into
-- history list hk: into the list's entry of f, whose own fields win, or
-- appended. (listEntry is entry_prelude.lua's, which runs in front of this
-- script.)
local function moveEntry(hk, f, tr, att)
  local e = listEntry(tr, f, att, math.floor(tonumber(f) / 1000))
  if not e then
    return
  end
  local list = redis.call('LRANGE', hk, 0, -1)
  for i = #list, 1, -1 do
    local ok2, l = pcall(cjson.decode, list[i])
    if ok2 and type(l) == 'table' and l.f == f then
      for key, v in pairs(e) do
        if l[key] == nil then
          l[key] = v
        end
      end
      redis.call('LSET', hk, i - 1, cjson.encode(l))
      return
    end
  end
  if redis.call('RPUSH', hk, cjson.encode(e)) > hmax then
    redis.call('LTRIM', hk, -hmax, -1)
  end
  redis.call('PEXPIRE', hk, ARGV[4])
end

local lease = redis.call('GET', KEYS[1])
local leased = lease ~= false
local fence = 0
if leased then
  fence = tonumber(string.match(lease, '^%S+ (%d+)')) or 0
  if not force then
    return {2, redis.call('PTTL', KEYS[1]), fence}
  end
end

local state, found = 0, {}
local entries = {}
for i = 5, #KEYS do
  local v = redis.call('HGET', KEYS[i], field)
  if v then
    found[#found + 1] = KEYS[i]
    if #v >= 18 then
      local st, fen, _, att = struct.unpack('>BI7c8I2', v)
      if st >= 32 and #v >= 20 then
        local n = struct.unpack('>I2', v, 19)
        if #v >= 20 + n then
          entries[#entries + 1] = {string.format('%.0f', fen), string.sub(v, 21, 20 + n), att}
        end
      end
      if state == 0 then
        state = st % 16
      end
      if fen > fence then
        fence = fen
      end
    elseif state == 0 then
      state = -1
    end
  end
end

if nowus <= fence then
  return {3, fence, nowus}
end
for _, b in ipairs(found) do
  redis.call('HDEL', b, field)
end
if hmax > 0 then
  for _, fe in ipairs(entries) do
    moveEntry(KEYS[4], fe[1], fe[2], fe[3])
  end
end
redis.call('DEL', KEYS[2], KEYS[3])
local ended = 0
if leased then
  redis.call('DEL', KEYS[1])
  ended = 1
end
return {1, fence, state, ended}
