-- One instance's heartbeat for its waiters on one name, about every second
-- while it has any (core/state.lua: KEYS, ARGV[1..2]); also what an instance runs
-- when a lease of the name expires, to serve the line then.
--
-- ARGV[3]  how many of this instance's waiters on the name are in line, as
--          far as it knows
-- ARGV[4]  the line's "lost" (core/state.lua) as this instance's last keep-alive
--          on the name heard it (0: none); "" for its first
--
-- Replies, ended by finish() (core/messages.lua)
--   {next_expiry_in_ms, missing, lost, held}   the earliest live expiry (-1 when
--       none), after pruning and serving; missing 1 when this instance's
--       waiters may not all be in line any more: byinst names fewer of them
--       than it has (another instance pruned them while this one looked
--       dead), or the queue lost waiters that byinst still names (its key
--       was lost or expired: found now, or by any instance's keep-alive since
--       ARGV[4]); they ask again, and those no longer in line rejoin; lost:
--       "lost" now (0: none), for the next keep-alive's ARGV[4]; held 1
--       when a waiter that fits was held back for a freeze (or for a list
--       of freezes that was stale: the instance checks it and calls again)
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- byinst and the queue name the same waiters (every call adds or removes a
-- waiter in both), so byinst naming more than the queue holds means that the
-- queue lost some. Each instance forgets its own such entries (at most
-- PRUNE_BATCH a call) when it learns of a loss, and its waiters ask again.
--
-- Its cost grows with (instances x names with waiters), never with waiters
-- (after a loss, with at most SCAN_BATCH + PRUNE_BATCH of them, once).
-- It removes expired leases and the waiters of dead instances, and grants to
-- whoever fits, as every operation that changes the name does.
local lost_before = read_state('lost')
guard()
local expected, heard = tonumber(ARGV[3]), ARGV[4]
lost_before = tonumber(lost_before or '0')
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), ME)
local mine = redis.call('ZLEXCOUNT', K_BYINST, '[' .. ME .. '|', '[' .. ME .. '|\255')
local missing = 0
if mine < expected then
  missing = 1
end
drop_dead_instances()
local size = waiting()
if size ~= QUEUED_N then
  -- The line's sums do not count the queue (its key was lost or expired, or
  -- the owners hash was): they are the queue's again, its own when it is
  -- short, else its count and a weight that lets no newcomer past it until
  -- a call sees the line whole (core/admission.lua).
  if size <= SCAN_BATCH then
    local weight, ranked, largest = 0, nil, 0
    for _, waiter in ipairs(redis.call('ZRANGE', K_QUEUE, '0', '-1')) do
      local _, _, _, _, l, w, _, p = unpack_waiter(waiter)
      weight, p, largest = weight + tonumber(w), tonumber(p), math.max(largest, tonumber(l))
      if p > 0 then
        ranked = add_ranked(ranked, p, 1, tonumber(w))
      end
    end
    set_queued(size, weight, ranked, largest)
  else
    -- (Each priority's share unknown too: none let past.)
    local ranked = {}
    for p = 1, 9 do
      ranked[p] = {0, UNKNOWN_WEIGHT}
    end
    set_queued(size, UNKNOWN_WEIGHT, ranked, QUEUED_L)
  end
end
if redis.call('ZCARD', K_BYINST) > size and now_ms - lost_before > ALIVE_MS then
  -- byinst names waiters (of live instances) that the queue lost: noted, so
  -- that every instance learns it at its next keep-alive (once in ALIVE_MS:
  -- by then each live instance has heard it).
  LOST = now_ms
end
if LOST or size < mine or (heard ~= '' and lost_before ~= tonumber(heard)) then
  -- The queue lost waiters, some of them perhaps this instance's: they ask
  -- again, and byinst forgets those of them not in the queue.
  missing = 1
  local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. ME .. '|', '[' .. ME .. '|\255',
    'LIMIT', 0, PRUNE_BATCH)
  for _, member in ipairs(members) do
    if not redis.call('ZSCORE', K_QUEUE, string.sub(member, #ME + 2)) then
      redis.call('ZREM', K_BYINST, member)
    end
  end
end
-- The owners hash (the line's sums among it) outlives the line's keys.
keep_leases(now_ms + LINE_TTL_MS, false)
local first = first_lease()
local used = used_now(first)
if serve_line(used, first ~= nil) > used then
  first = first_lease()
end
touch_line()
return finish({(time_left(first, false)), missing, LOST or lost_before, HELD_BACK and 1 or 0})
