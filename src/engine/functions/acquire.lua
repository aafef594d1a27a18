-- Acquire a lease, or join the line of waiters (line.lua: KEYS, ARGV[1..6]).
--
-- ARGV[7]  the waiter, as the line keeps it ("id|tag|instance|ttl_ms|limit|newest|owner",
--          line.lua): id is the new lease's id (a UUID), limit 1 for a lock
--          (1 .. 100000), ttl in milliseconds (1 .. 86400000), owner "" for none
-- ARGV[8]  1: join the line when busy (the caller waits); 0: do not queue
-- ARGV[9]  1: the id may be known (an earlier call with it may have run);
--          0: a fresh id, which holds no lease and has no place in line
--
-- Replies, each ended by finish() (line.lua)
--   {1, fencing_token, expires_at_ms}
--       acquired: now, or earlier by a grant to this waiter, which this call
--       confirms (a waiter's instance calls again to confirm a grant made by
--       another instance's call, or after a missed message); the lease is
--       held until expires_at_ms
--   {2, owner}
--       superseded: a newer newest_wins request (of that owner, "" none) took
--       this waiter's place; it neither joins the line nor acquires
--   {0, holders, waiting, next_expiry_in_ms, owner, queued}
--       busy. queued 1: in line (joined now or before), holders and waiting
--       0 (not counted: a waiter needs only when the first lease ends);
--       queued 0: refused, with the live leases, the requests in line, and
--       the time left and owner of the lease that ends first (-1 and "" when
--       none)
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- A request that has not queued acquires only when holders + waiting < limit,
-- so it never overtakes a queued waiter.
local waiter, join, known = ARGV[7], ARGV[8] == '1', ARGV[9] == '1'
local id, _, _, ttl, limit, newest, owner = unpack_waiter(waiter)
ttl, limit, newest = tonumber(ttl), tonumber(limit), newest == '1'

-- The lease that ends first, read (not yet pruned) before anything else: a
-- call on a lock that is held by a live lease takes no token (it joins the
-- line, or answers busy), so only then is the guard's read skipped.
local peeked = redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')
local packed
if known or KIND ~= 'lock' or #peeked == 0 or tonumber(peeked[2]) <= now_ms then
  packed = guard(known and id or nil)
end
local queued = false
if known then
  -- A grant to this waiter: confirmed here, by its own instance, before the
  -- client is told (a provisional grant that lapsed is not live any more,
  -- and this waiter then rejoins the line below).
  local lease = lease_of(packed)
  if lease then
    confirm(id, lease)
    return finish({1, lease.token, lease.expires_at})
  end
  -- Queued already (asking again after a missed message), or superseded
  -- meanwhile by a newer newest_wins request.
  queued = redis.call('ZSCORE', K_QUEUE, waiter) ~= false
  if not queued and newest and join then
    local by = redis.call('HGET', K_NOTES, 's:' .. id)
    if by then
      redis.call('HDEL', K_NOTES, 's:' .. id)
      return finish({2, by})
    end
  end
end

-- The live leases: a lock has at most one.
local first = first_lease(peeked)
local held = 0
if first then
  held = KIND == 'lock' and 1 or holders()
end
local served = serve_line(held, first ~= nil)
if served > held then
  -- Grants changed which lease ends first.
  held, first = served, first_lease()
end

if queued then
  return finish({0, 0, 0, next_expiry(first, false), '', 1})
end
if held < limit then
  -- Room now, unless the line is ahead of it.
  local before = QUEUE_EMPTY and 0 or waiting()
  if held + before < limit then
    local token, full = write_lease(id, ttl, limit, owner, false, held == 0)
    event('acquired', owner, token)
    return finish({1, token, full})
  end
end
if not join then
  local expires_in, first_owner = next_expiry(first, true)
  return finish({0, held, waiting(), expires_in, first_owner, 0})
end

local superseded = false
if newest then
  local older = redis.call('HGET', K_NOTES, 'newest')
  if older and redis.call('ZSCORE', K_QUEUE, older) then
    local older_id, older_tag, older_instance, _, _, _, older_owner = unpack_waiter(older)
    remove_waiter(older, older_instance, '1')
    redis.call('HSET', K_NOTES, 's:' .. older_id, owner)
    tell(older_instance, 's ' .. older_tag .. ' ' .. owner)
    event('left', older_owner)
    superseded = true
  end
end
-- Last in line: a ticket after the last one, in joining order.
local last = redis.call('ZRANGE', K_QUEUE, '-1', '-1', 'WITHSCORES')
local ticket = now_us
if #last > 0 and tonumber(last[2]) >= ticket then
  ticket = tonumber(last[2]) + 1
end
local _, _, instance = unpack_waiter(waiter)
redis.call('ZADD', K_QUEUE, num(ticket), waiter)
redis.call('ZADD', K_BYINST, '0', instance .. '|' .. waiter)
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), instance)
if newest then
  redis.call('HSET', K_NOTES, 'newest', waiter)
end
if #last == 0 or newest then
  -- The line's keys may be new: they get their TTL (the keep-alives keep it).
  touch_line()
end
event('queued', owner)
if superseded then
  -- A superseded waiter ahead may have left room (with mixed limits).
  serve_line(held, true)
  local lease = live_lease(id)
  if lease then
    return finish({1, lease.token, lease.expires_at})
  end
end
return finish({0, 0, 0, next_expiry(first, false), '', 1})
