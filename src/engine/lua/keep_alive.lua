-- One instance's heartbeat for its waiters on one name, about every second
-- while it has any (line.lua: KEYS, ARGV[1..6]); also what an instance runs
-- when a lease of the name expires, to serve the line then.
--
-- ARGV[7..] lease ids granted to this instance's waiters by other instances'
--           calls, and answered to their clients since the last call: their
--           grants are confirmed
--
-- Replies, ended by finish() (line.lua)
--   {next_expiry_in_ms, waiting}   the earliest live expiry (-1 when none) and
--                                  how many wait, after pruning and serving
--
-- Its cost grows with (instances x names with waiters), never with waiters.
-- It removes expired leases and the waiters of dead instances, and grants to
-- whoever fits, as every operation that changes the name does.
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), ME)
for i = 7, #ARGV do
  local lease = live_lease(ARGV[i])
  if lease then
    confirm(ARGV[i], lease)
  end
end
drop_dead_instances()
local first = first_lease()
local held = 0
if first then
  held = KIND == 'lock' and 1 or holders()
end
if serve_line(held, first ~= nil) > held then
  first = first_lease()
end
touch_line()
return finish({(next_expiry(first, false)), waiting()})
