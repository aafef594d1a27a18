-- Acquire a lease, or join the line of waiters (line.lua: KEYS, ARGV[1..5]).
--
-- ARGV[6]  lease id (UUID) of the new lease; also the waiter's id in the line
-- ARGV[7]  tag: a number naming the waiter on its instance (published on grants)
-- ARGV[8]  instance id of the caller
-- ARGV[9]  limit (1 for a lock; 1 .. 100000), judged for this acquisition only
-- ARGV[10] ttl in milliseconds (1 .. 86400000)
-- ARGV[11] owner label, "" for none
-- ARGV[12] 1: join the line when busy (the caller waits); 0: do not queue
-- ARGV[13] 1: newest_wins (joining makes the queued newest_wins waiter leave)
-- ARGV[14] 1: the id may be known (an earlier call with it may have run);
--          0: a fresh id, which holds no lease and has no place in line
--
-- Replies
--   {1, fencing_token, expires_at_ms}
--       acquired: now, or earlier by a grant to this waiter (a repeated call
--       after a missed message returns that lease and confirms it)
--   {2, owner}
--       superseded: a newer newest_wins request (of that owner, "" none) took
--       this waiter's place; it neither joins the line nor acquires
--   {0, holders, waiting, next_expiry_in_ms, owner, ticket, position}
--       busy: holders and waiting counted after this call; next_expiry_in_ms
--       and owner of the lease that ends first (-1 and "" when none); ticket 0
--       and position 0 when not queued, else its place (1 = next)
--   each followed by the expired leases it noticed (line.lua: noticed())
--   error "BATON fencing counter past 2^53 ..." when tokens cannot grow exactly
--
-- A request that has not queued acquires only when holders + waiting < limit,
-- so it never overtakes a queued waiter.
local id, tag, instance = ARGV[6], ARGV[7], ARGV[8]
local limit, ttl, owner = tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11]
local join, newest, known = ARGV[12] == '1', ARGV[13] == '1', ARGV[14] == '1'

end_expired()
drop_dead_instances()
local held = serve_line()

local lease, queued, by = nil, false, false
if known then
  lease = live_lease(id)
  if lease then
    confirm(id, lease)
    return noticed({1, lease.token, lease.expires_at})
  end
  -- Queued already (asking again after a missed message), or superseded
  -- meanwhile by a newer newest_wins request.
  local found = redis.call('HMGET', K_WAITERS, id, 's:' .. id)
  queued, by = found[1], found[2]
  if not queued and by and join then
    redis.call('HDEL', K_WAITERS, 's:' .. id)
    return noticed({2, by})
  end
end
local ticket = 0
-- Holders, waiting and its position, once it is known that nothing changed
-- them since they were counted.
local counted
if not queued then
  -- Nothing changed the holders since the line was served.
  local before = waiting()
  if held + before < limit then
    local token, full = write_lease(id, ttl, limit, owner, false)
    event('acquired', owner, token)
    return noticed({1, token, full})
  end
  if join then
    local superseded = false
    if newest then
      local older = redis.call('HGET', K_WAITERS, 'newest')
      local packed = older and redis.call('HGET', K_WAITERS, older)
      if packed then
        local older_tag, older_owner = remove_waiter(older, packed)
        redis.call('HSET', K_WAITERS, 's:' .. older, owner)
        redis.call(NAME_PUBLISH, NAME_CHANNEL, 's ' .. older_tag .. ' ' .. owner)
        event('left', older_owner)
        superseded = true
      end
    end
    ticket = next_token(LINE_TTL_MS)
    local flag = newest and '1' or '0'
    redis.call('ZADD', K_QUEUE, num(ticket), id)
    redis.call('HSET', K_WAITERS, id, num(ticket) .. '|' .. tag .. '|' .. instance .. '|' ..
      num(ttl) .. '|' .. num(limit) .. '|' .. num(now_ms) .. '|' .. flag .. '|' .. owner)
    if newest then
      redis.call('HSET', K_WAITERS, 'newest', id)
    end
    redis.call('ZADD', K_BYINST, '0', instance .. '|' .. id)
    redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), instance)
    event('queued', owner)
    touch_line()
    -- Its ticket is the newest: last in line.
    counted = {held, before + 1, before + 1}
    -- A superseded waiter ahead may have left room (nothing else changed
    -- since the line was served above).
    if superseded then
      counted = nil
      serve_line()
      lease = live_lease(id)
      if lease then
        confirm(id, lease)
        return noticed({1, lease.token, lease.expires_at})
      end
    end
    queued = true
  end
elseif join then
  -- Its keep-alive keeps the line's keys; this call is that instance's too.
  touch_line()
end

if not counted then
  local position = 0
  if queued then
    ticket = tonumber(redis.call('ZSCORE', K_QUEUE, id))
    position = redis.call('ZRANK', K_QUEUE, id) + 1
  end
  counted = {holders(), waiting(), position}
end
-- A waiter that joined needs only the time; a refusal names the owner too.
local expires_in, first_owner = next_expiry(not join)
return noticed({0, counted[1], counted[2], expires_in, first_owner, ticket, counted[3]})
