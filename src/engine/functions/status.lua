-- A lock or semaphore as anyone may see it, never a lease id
-- (core/state.lua: KEYS, ARGV[1..2]). Bounded: at most 100 leases and 100 waiters. It writes only to
-- take the waiters of dead instances out of the line (and its sums).
--
-- Reply
--   {holders, used, limit, waiting, n, token_1, expires_in_ms_1, weight_1, owner_1,
--    held_ms_1, ...,
--    m, owner_1, waited_ms_1, weight_1, priority_1, kept_until_ms_1, ..., owner_m,
--    waited_ms_m, weight_m, priority_m, kept_until_ms_m}
--   holders: live leases in all; used: their weight (used_unpruned(),
--   core/leases.lua); limit: that of the latest acquisition (0 when none is
--   known); n (<= 100) leases, those that expire first; m (<= 100) waiters,
--   in the order they will be served; owner "" when none
read_state()
drop_dead_instances()
-- (The line's sums lost those waiters.)
save()
local reply = {holders(), used_unpruned(), LIMIT, waiting()}
append_leases(reply)
local line = redis.call('ZRANGE', K_QUEUE, '0', '99', 'WITHSCORES')
reply[#reply + 1] = #line / 2
for i = 1, #line, 2 do
  local _, _, _, _, _, weight, _, priority, owner = unpack_waiter(line[i])
  priority = tonumber(priority or '0')
  -- A seq is the time of joining (core/state.lua).
  reply[#reply + 1] = owner or ''
  reply[#reply + 1] = math.max(0, now_ms - joined_ms(tonumber(line[i + 1]), priority))
  reply[#reply + 1] = tonumber(weight or '1')
  reply[#reply + 1] = priority
  -- A ticket (core/tickets.lua): until when its place is kept; 0 for a
  -- request waiting on an instance.
  reply[#reply + 1] = tonumber(string.match(line[i], '^[^|]*|%d+|~(%d+)~') or '0')
end
return reply
