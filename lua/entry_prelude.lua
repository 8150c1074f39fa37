-- entry_prelude.lua: prepended to the scripts that move a record's history
-- entry into a key's history list (idem_claim.lua, idem_reset.lua; see
-- scripts.PlainWith): it defines local functions only, and uses no KEYS or
-- ARGV of its own.
-- Returns  nothing: the script body follows.

-- hex returns the bytes of v as lowercase hex digits.
local function hex(v)
  return (string.gsub(v, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

-- listEntry returns history entry tr of the attempt under fence f (decimal
-- text), attempt att, started at s (unix ms), as the table the history list
-- keeps (idem_history.lua's members), nil when unreadable: the binary form
-- (idempotency/history.go), or the JSON text of a record written before it
-- (which has its own members).
local function listEntry(tr, f, att, s)
  if string.byte(tr, 1) ~= 1 then
    local ok, e = pcall(cjson.decode, tr)
    if ok and type(e) == 'table' then
      return e
    end
    return nil
  end
  local ok, _, o, flags, w, tid, sid, ty, pos = pcall(struct.unpack, '>Bc8BBc0Bc0Bc0Bc0', tr)
  if not ok then
    return nil
  end
  if flags % 2 == 1 then
    tid = hex(tid)
  end
  if flags % 4 >= 2 then
    sid = hex(sid)
  end
  local e = {f = f, a = att, s = s, o = o}
  for k, v in pairs({w = w, t = tid, sp = sid, ty = ty}) do
    if v ~= '' then
      e[k] = v
    end
  end
  if #tr >= pos + 6 then
    e.e, e.x = struct.unpack('>I6', tr, pos), string.sub(tr, pos + 6)
  end
  return e
end
