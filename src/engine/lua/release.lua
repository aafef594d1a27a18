-- End a lease, or leave the line, and serve whoever moves up (line.lua: KEYS,
-- ARGV[1..6]).
--
-- ARGV[7]  lease id (the waiter's id while it waits)
-- ARGV[8]  mode:
--            "release"  the holder gives the lease back (DELETE)
--            "leave"    a waiter whose client is gone: leaves the line, and
--                       releases the lease if it was granted meanwhile
--            "give-up"  a waiter whose wait ended: leaves the line, but keeps
--                       a lease granted meanwhile (the client gets it)
-- ARGV[9]  the waiter, as the line keeps it (line.lua), for "leave" and
--          "give-up"; "" for "release"
--
-- Replies, each ended by finish() (line.lua)
--   {3, fencing_token, expires_at_ms}  "give-up" found a granted lease: kept, confirmed
--   {code, holders, waiting, next_expiry_in_ms, owner, released_token, released_owner}, code:
--       1  released a live lease
--       2  left the line
--       0  nothing: no live lease, not in line
--   with the name's state afterwards ("give-up" only; 0, 0, -1 and "" for
--   the others): live leases, queued requests, and the time left and owner
--   of the lease that ends first (-1 and "" when none);
--   then the fencing token and owner of the lease released (0 and "" unless
--   code 1), for the audit line
local id, mode, waiter = ARGV[7], ARGV[8], ARGV[9]

local code = 0
local released_token, released_owner = 0, ''
if waiter ~= '' then
  local _, _, instance, _, _, newest, owner = unpack_waiter(waiter)
  if newest == '1' then
    redis.call('HDEL', K_NOTES, 's:' .. id)
  end
  if redis.call('ZSCORE', K_QUEUE, waiter) then
    remove_waiter(waiter, instance, newest)
    event('left', owner)
    code = 2
  end
end
if code == 0 then
  -- The lease and the fence in one read: a release usually grants next.
  local packed = read_owners(id)
  local lease = lease_of(packed)
  if lease and mode == 'give-up' then
    confirm(id, lease)
    return finish({3, lease.token, lease.expires_at})
  elseif lease then
    local held = KIND == 'lock' and 0 or holders() - 1
    event('released', lease.owner, lease.token, held)
    -- Served before the lease is removed: the leases key stays, with its TTL.
    serve_line(held, true)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_OWNERS, id)
    released_token, released_owner = lease.token, lease.owner
    code = 1
  elseif packed then
    -- An expired lease is never released, but forgotten.
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_OWNERS, id)
  end
end
if code ~= 1 then
  -- Whoever moved up (or waited behind an expired lease) may fit now.
  local first = first_lease()
  local held = 0
  if first then
    held = KIND == 'lock' and 1 or holders()
  end
  serve_line(held, first ~= nil)
end
if mode ~= 'give-up' then
  -- The name's state matters only to a waiter that gives up (its 409).
  return finish({code, 0, 0, -1, '', released_token, released_owner})
end
local expires_in, owner = next_expiry(first_lease(), true)
return finish({code, holders(), waiting(), expires_in, owner, released_token, released_owner})
