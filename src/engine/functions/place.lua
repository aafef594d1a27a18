-- A waiter's place in line and the leases it waits behind, for acquisitions
-- that report their progress (core/state.lua: KEYS, ARGV[1..2]). Bounded: at most
-- 100 leases. It writes only to take the waiters of dead instances out of
-- the line (and its sums).
--
-- ARGV[3]  the waiter, as the line keeps it (core/formats.lua)
--
-- Reply
--   {position, waiting, n, token_1, expires_in_ms_1, weight_1, owner_1, held_ms_1, ...,
--    token_n, ...}
--   position: 1 for the next to be served, 0 when the waiter is not in line
--   (granted, or gone); waiting: requests in line; n (<= 100) live leases,
--   those that expire first; owner "" when none
read_state()
drop_dead_instances()
-- (The line's sums lost those waiters.)
save()
local rank = redis.call('ZRANK', K_QUEUE, ARGV[3])
local reply = {rank and (rank + 1) or 0, waiting()}
append_leases(reply)
return reply
