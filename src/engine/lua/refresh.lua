-- Extend a live lease (line.lua: KEYS, ARGV[1..5]).
--
-- ARGV[6]  lease id
-- ARGV[7]  new ttl in milliseconds from now, or "" to reuse the lease's own ttl
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, owner}   refreshed; owner "" when none
--   {0}   no live lease: nothing changed (an expired lease is never brought back)
--
-- A refresh that moves the expiry earlier publishes "x EXPIRES_IN_MS" on the
-- name's channel, so the instances with waiters wake the line at the new expiry.
local id = ARGV[6]
local lease = live_lease(id)
if not lease then
  return {0}
end
local ttl = lease.ttl
if ARGV[7] ~= '' then
  ttl = tonumber(ARGV[7])
end
local expires_at = now_ms + ttl
local current = lease.score
redis.call('ZADD', K_LEASES, 'XX', num(expires_at), id)
redis.call('HSET', K_OWNERS, id, num(lease.token) .. '|' .. num(ttl) .. '|' .. num(lease.limit) ..
  '|0|' .. lease.owner)
extend_leases(ttl + LINE_TTL_MS)
extend(K_FENCE, ttl + FENCE_SLACK_MS)
if expires_at < current and waiting() > 0 then
  redis.call(NAME_PUBLISH, NAME_CHANNEL, 'x ' .. num(ttl))
end
event('refreshed', lease.owner, lease.token)
return {1, lease.token, expires_at, ttl, lease.limit, lease.owner}
