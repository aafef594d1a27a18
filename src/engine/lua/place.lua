-- A waiter's place in line and the leases it waits behind, for acquisitions
-- that report their progress (line.lua: KEYS, ARGV[1..5]); writes nothing.
-- Bounded: at most 100 leases.
--
-- ARGV[6]  the waiter's id
--
-- Reply
--   {position, waiting, n, token_1, expires_in_ms_1, owner_1, ..., token_n, ...}
--   position: 1 for the next to be served, 0 when the id is not in line
--   (granted, or gone); waiting: requests in line; n (<= 100) live leases,
--   those that expire first; owner "" when none
local rank = redis.call('ZRANK', K_QUEUE, ARGV[6])
local reply = {rank and (rank + 1) or 0, waiting()}
append_leases(reply)
return reply
