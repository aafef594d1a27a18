-- Extend a live lease (core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  lease id
-- ARGV[4]  new ttl in milliseconds from now, or "" to reuse the lease's own ttl
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, weight, owner}   refreshed; owner "" when none
--   {0}   no live lease: nothing changed (an expired lease is never brought back)
--
-- A refresh that moves the expiry earlier publishes "x EXPIRES_IN_MS" on the
-- name's channel, so the instances with waiters wake the line at the new expiry.
-- While someone follows a lease of the name, "r TOKEN EXPIRES_AT_MS TTL_MS"
-- tells the holder's stream (core/messages.lua).
local id = ARGV[3]
local lease = lease_for(id, read_state(id))
if not lease then
  return {0}
end
local ttl = lease.ttl
if ARGV[4] ~= '' then
  ttl = tonumber(ARGV[4])
end
local expires_at = now_ms + ttl
if rewrite_lease(id, lease, ttl, expires_at) and waiting() > 0 then
  tell_ends_sooner(ttl)
end
keep_leases(expires_at, false)
tell_followers('r ' .. num(lease.token) .. ' ' .. num(expires_at) .. ' ' .. num(ttl))
event('refreshed', lease.owner, lease.token)
return {1, lease.token, expires_at, ttl, lease.limit, lease.weight, lease.owner}
