-- End a lease, or leave the line, and serve whoever moves up (line.lua: KEYS,
-- ARGV[1..6]).
--
-- ARGV[7]  lease id (the waiter's id while it waits)
-- ARGV[8]  mode:
--            "release"  the holder gives the lease back (DELETE)
--            "leave"    a waiter whose client is gone: leaves the line, and
--                       releases the lease if it was granted meanwhile
--            "give-up"  a waiter whose wait ended: takes a lease granted
--                       meanwhile, or one the name has room for now (the line
--                       is served first, so a waiter at the head of a free
--                       name is never refused); else leaves the line
-- ARGV[9]  the waiter, as the line keeps it (line.lua), for "leave" and
--          "give-up"; "" for "release"
--
-- Replies, each ended by finish() (line.lua)
--   {3, fencing_token, expires_at_ms}  "give-up" got a lease: held (confirmed)
--                                      until expires_at_ms
--   {code, holders, waiting, next_expiry_in_ms, owner, released_token, released_owner}, code:
--       1  released a live lease
--       2  left the line
--       0  nothing: no live lease, not in line
--   with the name's state afterwards ("give-up" only; 0, 0, -1 and "" for
--   the others): live leases, queued requests, and the time left and owner
--   of the lease that ends first (-1 and "" when none);
--   then the fencing token and owner of the lease released (0 and "" unless
--   code 1), for the audit line
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
local id, mode, waiter = ARGV[7], ARGV[8], ARGV[9]
-- The lease and the fence in one read: a release usually grants next.
local packed = guard(id)

-- The live leases now (a lock has at most one), and the first to end.
local function held_now()
  local first = first_lease()
  local held = 0
  if first then
    held = KIND == 'lock' and 1 or holders()
  end
  return held, first
end

local code = 0
local released_token, released_owner = 0, ''
if waiter ~= '' then
  local _, _, instance, ttl, limit, newest, owner = unpack_waiter(waiter)
  -- A superseded waiter (its note says by whom) never takes room.
  local superseded = newest == '1' and redis.call('HDEL', K_NOTES, 's:' .. id) == 1
  local queued = redis.call('ZSCORE', K_QUEUE, waiter)
  if mode == 'give-up' then
    -- Served first: a waiter that fits now is granted rather than refused.
    local held, first = held_now()
    if queued then
      serve_line(held, first ~= nil)
    end
    local lease = live_lease(id)
    if lease then
      confirm(id, lease)
      return finish({3, lease.token, lease.expires_at})
    end
    if not queued and not superseded then
      -- Out of line (pruned, or its keys lost): it takes room the name has
      -- now, as a request that never queued would.
      held = held_now()
      if held + waiting() < tonumber(limit) then
        local token, full = write_lease(id, tonumber(ttl), tonumber(limit), owner, false,
          held == 0)
        event('acquired', owner, token)
        return finish({3, token, full})
      end
    end
  end
  if queued then
    -- Still in line: a grant to it returned above.
    remove_waiter(waiter, instance, newest)
    event('left', owner)
    code = 2
  else
    redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  end
end
if code == 0 then
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
  local held, first = held_now()
  serve_line(held, first ~= nil)
end
if mode ~= 'give-up' then
  -- The name's state matters only to a waiter that gives up (its 409).
  return finish({code, 0, 0, -1, '', released_token, released_owner})
end
local expires_in, owner = next_expiry(first_lease(), true)
return finish({code, holders(), waiting(), expires_in, owner, released_token, released_owner})
