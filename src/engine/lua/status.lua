-- A lock or semaphore as anyone may see it, never a lease id (line.lua: KEYS,
-- ARGV[1..5]); writes nothing. Bounded: at most 100 leases and 100 waiters.
--
-- Reply
--   {holders, limit, waiting, n, token_1, expires_in_ms_1, owner_1, ..., token_n, ...,
--    m, owner_1, waited_ms_1, ..., owner_m, waited_ms_m}
--   holders: live leases in all; limit: that of the latest acquisition (0 when
--   none is known); n (<= 100) leases, those that expire first; m (<= 100)
--   waiters, in the order they will be served; owner "" when none
local reply = {holders(), tonumber(redis.call('HGET', K_OWNERS, 'limit') or '0'), waiting()}
append_leases(reply)
local line = redis.call('ZRANGE', K_QUEUE, '0', '99')
reply[#reply + 1] = #line
for _, id in ipairs(line) do
  local packed = redis.call('HGET', K_WAITERS, id) or '0|0||0|0|' .. num(now_ms) .. '|0|'
  local _, _, _, _, _, joined, _, owner = unpack_waiter(packed)
  reply[#reply + 1] = owner
  reply[#reply + 1] = math.max(0, now_ms - tonumber(joined))
end
return reply
