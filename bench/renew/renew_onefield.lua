-- renew_onefield.lua: a prototype of the lease renewal for bench/renew, not
-- shipped: the owner token and fence kept in one hash field (own =
-- "token:fence"), checked with one HGET and one string compare, and one TTL
-- for the whole call.
-- KEYS[i]      the i-th lease key (a hash: own = "token:fence")
-- ARGV[1]      the new TTL of every key, in milliseconds
-- ARGV[i+1]    the caller's "token:fence" for KEYS[i]
-- Returns      an array with one status a key, in order: 1 renewed, 0 no
--              owner (expired or released), 2 another owner
local out = {}
local ttl = ARGV[1]
for i = 1, #KEYS do
  local cur = redis.call('HGET', KEYS[i], 'own')
  if not cur then
    out[i] = 0
  elseif cur ~= ARGV[i + 1] then
    out[i] = 2
  else
    redis.call('PEXPIRE', KEYS[i], ttl)
    out[i] = 1
  end
end
return out
