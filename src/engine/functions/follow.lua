-- Follow a lease: a holder's stream opens on it, or is kept open
-- (core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  lease id; "" to keep the name followed (an instance with
--          holders' streams on the name renews it every FOLLOW_RENEW,
--          engine/following/)
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
local FOLLOW_MS = 30000
local id = ARGV[3]
local lease
if id ~= '' then
  lease = lease_for(id, read_state(id))
  if not lease then
    return {0}
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
