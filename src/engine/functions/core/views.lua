-- The lease core, part 10: what a call shows of a name, never a lease id.
-- The live leases a status or a waiter's place lists (append_leases()), and
-- the lease in the way of a refused or waiting request (in_the_way(),
-- time_left()).

-- Appends the live leases that expire first (at most 100) to `reply`: their
-- count n, then token, expires_in_ms, weight, owner ("" none) and held_ms
-- (how long it has been held: the expected wait needs it) of each. A
-- provisional grant shows its full expiry. (status.rs decodes them.)
local function append_leases(reply)
  local leases = live_leases(100)
  reply[#reply + 1] = #leases
  for _, lease in ipairs(leases) do
    if lease then
      reply[#reply + 1] = lease.token
      reply[#reply + 1] = lease.expires_at - now_ms
      reply[#reply + 1] = lease.weight
      reply[#reply + 1] = lease.owner
      reply[#reply + 1] = math.max(0, now_ms - lease.acquired)
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = ''
      reply[#reply + 1] = 0
    end
  end
  return reply
end

-- The time left (ms) and owner ("" when `with_owner` is false, not looked
-- up) of `lease` ({id, expiry}); -1 and "" when nil.
local function time_left(lease, with_owner)
  if not lease then
    return -1, ''
  end
  local owner = ''
  if with_owner then
    local live = live_lease(lease[1])
    owner = live and live.owner or ''
  end
  return lease[2] - now_ms, owner
end

-- When the leases in the way of a request end, and the owner of the one
-- that ends then: for a lock, the last (a writer waits for every reader);
-- for a semaphore, the first (one leaving may make room).
local function in_the_way(first, with_owner)
  if KIND == 'lock' and first then
    return time_left(last_lease(), with_owner)
  end
  return time_left(first, with_owner)
end
