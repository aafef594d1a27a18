-- One instance's heartbeat for its waiters on one name, about every second
-- while it has any (line.lua: KEYS, ARGV[1..5]); also what an instance runs
-- when a lease of the name expires, to serve the line then.
--
-- ARGV[6]   instance id
-- ARGV[7..] lease ids granted to this instance's waiters and answered to
--           their clients since the last call: their grants are confirmed
--
-- Replies
--   {next_expiry_in_ms, waiting}   the earliest live expiry (-1 when none) and
--                                  how many wait, after pruning and serving;
--                                  then the expired leases it noticed (line.lua: noticed())
--
-- Its cost grows with (instances x names with waiters), never with waiters.
-- It removes expired leases and the waiters of dead instances, and grants to
-- whoever fits, as every script that changes the name does.
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), ARGV[6])
for i = 7, #ARGV do
  local lease = live_lease(ARGV[i])
  if lease then
    confirm(ARGV[i], lease)
  end
end
end_expired()
drop_dead_instances()
serve_line()
touch_line()
local expires_in = next_expiry(false)
return noticed({expires_in, waiting()})
