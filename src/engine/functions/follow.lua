-- Follow a lease: a holder's stream opens on it, or is kept open
-- (core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  lease id; "" to keep the name followed (an instance with
--          holders' streams on the name renews it every RENEW_EVERY,
--          engine/following/)
-- ARGV[4]  the lease's fencing token, when the stream knows it ("" when
--          it opens): a lease gone is looked up in the name's history
--
-- Sets "follow" in the owners hash to FOLLOW_MS from now: until then the
-- calls that change a lease of the name tell its stream on the name's
-- channel (tell_followers(), core/messages.lua). Only while the hash lives
-- (a lease is live): a field written to a hash that is gone would make it
-- without a TTL.
--
-- Replies
--   {1, fencing_token, expires_at_ms, expires_in_ms, ttl_ms, owner}
--        the lease is live (owner "" when none): followed from now on
--   {1}  (renewing) the name stays followed
--   {0}  no live lease (renewing: no lease of the name at all); nothing changed
--   {0, how}  no live lease; the history says how the lease of ARGV[4]
--        ended ("released", "expired", "force-released", "not-collected"),
--        among its last HISTORY_LOOK entries; "" when it does not say
--        (no history, or lost with Redis's data)
local FOLLOW_MS = 30000
local HISTORY_LOOK = 50
local id, token = ARGV[3], tonumber(ARGV[4] or '')
local lease
if id ~= '' then
  lease = lease_for(id, read_state(id))
  if not lease then
    if not token then
      return {0}
    end
    -- How it ended, if the history remembers (a stream that missed the
    -- words, its instance paused or Redis restarted, tells the truth).
    terms()
    local written = redis.call('XREVRANGE', K_HISTORY, '+', '-', 'COUNT', HISTORY_LOOK)
    for i = 1, #written do
      local how, packed = string.match(written[i][2][2], '^([^|]*)|%d+|(.*)$')
      if packed and parse_lease(packed).token == token then
        return {0, how}
      end
    end
    return {0, ''}
  end
else
  read_state()
  if UNTIL <= now_ms or holders() == 0 then
    return {0}
  end
end
redis.call('HSET', K_OWNERS, 'follow', num(now_ms + FOLLOW_MS))
if not lease then
  return {1}
end
return {1, lease.token, lease.expires_at, math.max(0, lease.expires_at - now_ms), lease.ttl,
  lease.owner}
