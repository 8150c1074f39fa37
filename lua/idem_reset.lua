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
-- KEYS[1]   lease key: hash with tok (owner token) and fen (fence)
-- KEYS[2]   heartbeat details key (string)
-- KEYS[3]   external result key (string)
-- KEYS[4..] record buckets (hashes): every bucket a claim of the key may read
-- ARGV[1]   record field (16-byte hash of the key)
-- ARGV[2]   "1" to end a live lease, "0" to refuse
-- Returns   {1, fence, state, lease ended (0/1)}  reset: fence is the highest the key had
--                                                  (0: none), state the record's (0: none,
--                                                  1..4 as in idem_claim.lua, -1 unreadable)
--           {2, remaining ms, lease fence}         refused: a lease is live and not forced
--           {3, fence, Redis time in µs}           refused: Redis time is not past the fence
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local field, force = ARGV[1], ARGV[2] == '1'

local lease = redis.call('HMGET', KEYS[1], 'tok', 'fen')
local leased = lease[1] ~= false
local fence = 0
if leased then
  fence = tonumber(lease[2]) or 0
  if not force then
    return {2, redis.call('PTTL', KEYS[1]), fence}
  end
end

local state, found = 0, {}
for i = 4, #KEYS do
  local v = redis.call('HGET', KEYS[i], field)
  if v then
    found[#found + 1] = KEYS[i]
    if #v >= 18 then
      local st, fen = struct.unpack('>BI7', v)
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
redis.call('DEL', KEYS[2], KEYS[3])
local ended = 0
if leased then
  redis.call('DEL', KEYS[1])
  ended = 1
end
return {1, fence, state, ended}
