-- idem_details.lua (fenced): save an attempt's heartbeat details (a progress
-- checkpoint) so that the next attempt of the same key can read them back.
-- The fence prelude has already checked KEYS[1] against ARGV[1] and ARGV[2].
--
-- KEYS[1]   lease key
-- KEYS[2]   heartbeat details key (string)
-- ARGV[1]   owner token, ARGV[2] fence (prelude)
-- ARGV[3]   details
-- ARGV[4]   time to keep them, in milliseconds (the retention)
-- Returns   1 saved, -1 lease lost (prelude)
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
