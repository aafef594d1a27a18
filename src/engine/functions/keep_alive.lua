-- One instance's heartbeat for its waiters on one name, about every second
-- while it has any (line.lua: KEYS, ARGV[1..2]); also what an instance runs
-- when a lease of the name expires, to serve the line then.
--
-- ARGV[3]  how many of this instance's waiters on the name are in line, as
--          far as it knows
--
-- Replies, ended by finish() (line.lua)
--   {next_expiry_in_ms, missing}   the earliest live expiry (-1 when none),
--       after pruning and serving; missing 1 when
--       the line holds fewer of this instance's waiters than it has (another
--       instance pruned them while this one looked dead, or the line's keys
--       were lost): they ask again, and rejoin
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- Its cost grows with (instances x names with waiters), never with waiters.
-- It removes expired leases and the waiters of dead instances, and grants to
-- whoever fits, as every operation that changes the name does.
read_state()
guard()
local expected = tonumber(ARGV[3])
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), ME)
local mine = redis.call('ZLEXCOUNT', K_BYINST, '[' .. ME .. '|', '[' .. ME .. '|\255')
local missing = 0
if mine < expected then
  missing = 1
end
if waiting() < mine then
  -- The queue lost waiters that byinst still names (its key was lost):
  -- they ask again, and byinst forgets those not in the queue.
  missing = 1
  local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. ME .. '|', '[' .. ME .. '|\255',
    'LIMIT', 0, PRUNE_BATCH)
  for _, member in ipairs(members) do
    if not redis.call('ZSCORE', K_QUEUE, string.sub(member, #ME + 2)) then
      redis.call('ZREM', K_BYINST, member)
    end
  end
end
drop_dead_instances()
local first = first_lease()
local used = used_now(first)
if serve_line(used, first ~= nil) > used then
  first = first_lease()
end
touch_line()
return finish({(time_left(first, false)), missing})
