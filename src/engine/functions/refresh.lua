-- Extend a live lease (line.lua: KEYS, ARGV[1..2]).
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
local packed = pack_lease(lease.token, ttl, lease.limit, lease.weight, expires_at, 0, lease.owner)
if lease == SOLO then
  -- The name's only lease, and nobody waits (line.lua): its waiter's ttl is
  -- the lease's own from now on.
  redis.call('HSET', K_OWNERS, 'solo', num(expires_at) .. '|' .. num(lease.token) .. '|' ..
    table.concat({id, lease.tag, lease.instance, num(ttl), num(lease.limit), num(lease.weight),
      lease.newest, lease.owner}, '|'))
else
  redis.call('ZADD', K_LEASES, 'XX', num(expires_at), id)
  redis.call('HSET', K_OWNERS, id, packed)
  if expires_at < lease.score and waiting() > 0 then
    redis.call(NAME_PUBLISH, NAME_CHANNEL, 'x ' .. num(ttl))
  end
end
keep_leases(expires_at, false)
event('refreshed', lease.owner, lease.token)
return {1, lease.token, expires_at, ttl, lease.limit, lease.weight, lease.owner}
