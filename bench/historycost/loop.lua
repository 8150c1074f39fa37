-- loop.lua: run one history operation ARGV[1] times over a typical entry and
-- answer the microseconds it took (Redis TIME around the loop). ARGV[2] is
-- the operation: "decode_encode" (end an entry as idem_complete_batch.lua did
-- before: decode, set e and x, encode), "text_append" (as it does now: check
-- the entry's text, append e and x), "encode" (a claim's start entry, as
-- idem_claim.lua built it before), "text_start" (as it builds it now: its own
-- members, then the caller's, already JSON, appended as text), "carry" (a
-- completion ending the JSON entry a PROCESSING record carried: unpack the
-- record, append e and x to the entry's text), "binary_end" (as a
-- completion ends the binary entry now: the caller's entry, the packed end
-- made once a call, the end's name) or "none" (the empty loop). A claim
-- builds no binary entry: it stores the caller's as it is.
local s = '{"f":"1795702025793983","a":1,"s":1795702025793,"o":"a1b2c3d4e5f6a7b8","w":"host-1234/12345",' ..
  '"t":"0af7651916cd43dd8448eb211c80319c","sp":"b7ad6b7169203331","ty":"demo.transfer"}'
local n = tonumber(ARGV[1])
local op = ARGV[2]
local f = '1795702025793983'
local out
local tail = string.sub(s, string.find(s, ',"o":', 1, true), -2)
local nowtext = string.format('%.0f', 1795702025999)
local fnum = tonumber(f)
-- A typical entry in the binary form (idempotency/history.go): version, owner
-- digest, flags (raw IDs), then worker, trace, span and type, each after its length.
local bin = '\1a1b2c3d4\3\15host-1234/12345\16' .. string.rep('t', 16) .. '\8' .. string.rep('s', 8) .. '\13demo.transfer'
local endpack = struct.pack('>I6', 1795702025999)
local rec = struct.pack('>BI7c8I2I2', 33, fnum, 'abcdefgh', 1, #s) .. s
local t0 = redis.call('TIME')
for _ = 1, n do
  if op == 'decode_encode' then
    local e = cjson.decode(s)
    if e.f == f and e.x == nil then
      e.x, e.e = 'completed', 1795702025999
    end
    out = cjson.encode(e)
  elseif op == 'text_append' then
    if string.byte(s, -1) == 125 and string.find(s, '"f":"' .. f .. '"', 1, true)
      and not string.find(s, '"x":', 1, true) then
      out = string.sub(s, 1, -2) .. ',"e":' .. string.format('%.0f', 1795702025999) .. ',"x":' .. cjson.encode('completed') .. '}'
    end
  elseif op == 'text_start' then
    out = '{"f":"' .. f .. '","a":' .. 1 .. ',"s":' .. nowtext .. tail .. '}'
  elseif op == 'carry' then
    local _, fen, _, _, m = struct.unpack('>BI7c8I2I2', rec)
    if fen == fnum and string.byte(rec, 20 + m) == 125 then
      out = string.sub(rec, 21, 19 + m) .. ',"e":' .. nowtext .. ',"x":"completed"}'
    end
  elseif op == 'binary_end' then
    out = bin .. endpack .. 'completed'
  elseif op == 'encode' then
    local e = {f = f, a = 1, s = 1795702025793}
    local fields = {'o', 'w', 't', 'sp', 'ty'}
    local vals = {'a1b2c3d4e5f6a7b8', 'host-1234/12345', '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', 'demo.transfer'}
    for j = 1, 5 do
      e[fields[j]] = vals[j]
    end
    out = cjson.encode(e)
  end
end
local t1 = redis.call('TIME')
return (tonumber(t1[1]) - tonumber(t0[1])) * 1000000 + tonumber(t1[2]) - tonumber(t0[2])
