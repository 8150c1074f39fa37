-- dlq_stamp.lua (fenced): open a produce window on a dead-letter marker just
-- before the holder of the record's dead-letter lock produces the copy. A
-- later holder that finds the marker pending waits until the window has
-- closed before it looks for the copy, so that a produce still in flight
-- from a holder that lost the lock has landed or failed by then. Fenced by
-- the lock: a holder that lost it opens no window and produces nothing.
-- KEYS[1]  the dead-letter lock's lease key
-- KEYS[2]  the marker: "pending:<window end, Redis ms>;<offsets>" or "1" (done)
-- ARGV[1]  owner token              ARGV[2]  fence
-- ARGV[3]  the dead-letter topic's end offsets listed before any attempt
--          ("partition=offset,..."); an earlier attempt's are kept
-- ARGV[4]  the window in milliseconds: the produce ends (lands or fails) in it
-- ARGV[5]  the marker's retention in milliseconds
-- Returns  1 window opened; 2 the marker says done (produce nothing);
--          -1 lock lost.
local v = redis.call('GET', KEYS[2])
local offsets = ARGV[3]
if v then
  if string.sub(v, 1, 8) ~= 'pending:' then
    return 2
  end
  local rest = string.sub(v, 9)
  local semi = string.find(rest, ';', 1, true)
  if semi then
    offsets = string.sub(rest, semi + 1)
  else
    offsets = rest
  end
end
local t = redis.call('TIME')
local closes = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[4])
redis.call('SET', KEYS[2], 'pending:' .. string.format('%d', closes) .. ';' .. offsets, 'PX', ARGV[5])
return 1
