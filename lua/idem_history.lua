-- idem_history.lua: write one event of an idempotency key's attempt history
-- (a plain script), for the events the other scripts do not write: the claim
-- script (idem_claim.lua) writes an attempt's start and the complete script
-- (idem_complete_batch.lua) a completed or failed end; this one writes the
-- rarer ends (retry, lease lost, commit refused, cancelled, dead-lettered,
-- unrecorded) and the compensation steps, and the starts and ends written
-- through Store.HistoryStart and Store.HistoryEnd. A key's first attempt
-- keeps its entry in its record until another claim or a reset moves it here
-- (idem_claim.lua): an event about it that finds no entry here writes one
-- with the event's fields only, and readers merge the record's entry into
-- it (the fields written here win). The history is a list of
-- JSON entries, one an attempt, oldest first, kept as long as the key's
-- record (PX = ARGV[2]) and bounded to the last ARGV[1] attempts. Entry fields: f fence (decimal string),
-- a attempt, o owner digest, w worker, s start and e end (Redis time, unix
-- ms), x how it ended, to 1 when a takeover ended it, t trace ID, sp span
-- ID, ty job type (absent in entries written before it was kept), c the compensation steps run for it ({n step, h handler, o outcome},
-- at most 64).
--
-- KEYS[1]  the history list (<prefix>idem:h:<tag>:<key>)
-- ARGV[1]  the most attempts kept
-- ARGV[2]  TTL in milliseconds (the record's retention)
-- ARGV[3]  fence of the attempt the event is about
-- ARGV[4]  event: "start", "end" or "comp"
-- ARGV[5]  JSON object: start: fields a, o, w, t, sp, ty; end: field x;
--          comp: one compensation step {n, h, o}
-- ARGV[6]  start of a takeover: the previous attempt's fence, whose entry
--          (if it has no end) ends now as taken over; else ""
-- Returns  1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local fence = ARGV[3]
local ev = ARGV[4]
local arg = cjson.decode(ARGV[5])

local list = redis.call('LRANGE', KEYS[1], 0, -1)
local function find(f)
  for i = #list, 1, -1 do
    local ok, e = pcall(cjson.decode, list[i])
    if ok and type(e) == 'table' and e.f == f then
      return i - 1, e
    end
  end
  return nil, nil
end
local function put(i, e)
  if i then
    redis.call('LSET', KEYS[1], i, cjson.encode(e))
  else
    redis.call('RPUSH', KEYS[1], cjson.encode(e))
  end
end

if ev == 'start' then
  if ARGV[6] ~= '' then
    local pi, pe = find(ARGV[6])
    if pi and pe.x == nil then
      pe.e, pe.x, pe.to = now, 'taken_over', 1
      put(pi, pe)
    end
  end
  local i, e = find(fence)
  e = e or {f = fence}
  for k, v in pairs(arg) do e[k] = v end
  e.s = e.s or now
  put(i, e)
elseif ev == 'end' then
  local i, e = find(fence)
  e = e or {f = fence}
  -- The owner's own account wins over a takeover's, which is kept in to.
  -- An operator's cancel is recorded as a terminal failure by the complete
  -- script, which writes 'failed'; the owner's 'cancelled' then names it.
  if e.x == nil or e.x == 'taken_over' or (e.x == 'failed' and arg.x == 'cancelled') then
    e.x, e.e = arg.x, now
  end
  put(i, e)
elseif ev == 'comp' then
  local i, e = find(fence)
  e = e or {f = fence}
  if type(e.c) ~= 'table' then e.c = {} end
  if #e.c < 64 then
    table.insert(e.c, arg)
  end
  put(i, e)
end
redis.call('LTRIM', KEYS[1], -max, -1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
