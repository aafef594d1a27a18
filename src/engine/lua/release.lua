-- End a lease, or leave the line, and serve whoever moves up (line.lua: KEYS,
-- ARGV[1..5]).
--
-- ARGV[6]  lease id (the waiter's id while it waits)
-- ARGV[7]  mode:
--            "release"  the holder gives the lease back (DELETE)
--            "leave"    a waiter whose client is gone: leaves the line, and
--                       releases the lease if it was granted meanwhile
--            "give-up"  a waiter whose wait ended: leaves the line, but keeps
--                       a lease granted meanwhile (the client gets it)
--
-- Replies
--   {3, fencing_token, expires_at_ms}  "give-up" found a granted lease: kept, confirmed
--   {code, holders, waiting, next_expiry_in_ms, owner, released_token, released_owner}, code:
--       1  released a live lease
--       2  left the line
--       0  nothing: no live lease, not in line
--   with the name's state afterwards ("give-up" only; 0, 0, -1 and "" for
--   the others): live leases, queued requests, and the time left and owner
--   of the lease that ends first (-1 and "" when none);
--   then the fencing token and owner of the lease released (0 and "" unless
--   code 1), for the audit line;
--   each followed by the expired leases it noticed (line.lua: noticed())
local id, mode = ARGV[6], ARGV[7]

end_expired()
drop_dead_instances()

local code = 0
local released_token, released_owner = 0, ''
local packed = false
if mode ~= 'release' then
  packed = redis.call('HGET', K_WAITERS, id)
  redis.call('HDEL', K_WAITERS, 's:' .. id)
end
if packed then
  local _, owner = remove_waiter(id, packed)
  event('left', owner)
  code = 2
else
  local lease = live_lease(id)
  if lease and mode == 'give-up' then
    confirm(id, lease)
    serve_line()
    return noticed({3, lease.token, lease.expires_at})
  elseif lease then
    released_token, released_owner = end_lease(id, lease, 'released')
    code = 1
  else
    -- An expired lease is never released, but forgotten.
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_OWNERS, id)
  end
end
serve_line()
if mode ~= 'give-up' then
  -- The name's state matters only to a waiter that gives up (its 409).
  return noticed({code, 0, 0, -1, '', released_token, released_owner})
end
local expires_in, owner = next_expiry()
return noticed({code, holders(), waiting(), expires_in, owner, released_token, released_owner})
