-- Acquire a lease, or join the line of waiters (core/state.lua: KEYS,
-- ARGV[1..2]).
--
-- ARGV[3]  the waiter, as the line keeps it
--          ("id|tag|instance|ttl_ms|limit|weight|newest|priority|owner" ..
--          "\n" .. by .. "\n" .. override, core/formats.lua): id is the new
--          lease's id (a UUID), ttl in milliseconds (1 .. 86400000), limit
--          and weight as core/admission.lua names them for each kind, owner,
--          by and override "" for none
-- ARGV[4]  1: join the line when busy (the caller waits); 0: do not queue
-- ARGV[5]  the place (its seq, core/state.lua) an earlier call of this waiter
--          replied, "" for none: a waiter that asks again and is no longer in
--          line (dropped while its instance looked dead, its grant lapsed
--          unconfirmed, the queue's key lost) joins again in that place, not
--          at the back; a place of another priority is not taken. Not one
--          that kept its place whose ticket ended meanwhile (its tombstone,
--          core/tickets.lua: one HGET, only for such a call out of line):
--          it is gone ({4})
--
-- Replies, each ended by finish() (core/messages.lua)
--   {1, fencing_token, expires_at_ms}
--       acquired: now; or earlier, by a grant to this waiter, which this call
--       confirms (a waiter's instance calls again to confirm a grant made by
--       another instance's call, or after a missed message), or by an
--       earlier call with this waiter whose reply was lost (its lease, found
--       and not taken again); the lease is held until expires_at_ms
--   {2, owner}
--       superseded: a newer newest_wins request (of that owner, "" none) took
--       this waiter's place; it neither joins the line nor acquires
--   {0, holders, used, waiting, expires_in_ms, owner, queued[, place]}
--       busy. queued 1: in line (joined now or before), holders, used and
--       waiting 0 (not counted: a waiter needs only when the first lease
--       ends), the time left of the lease that ends first, and its place (its
--       seq, for ARGV[5] when it asks again); queued 0 (no place): refused,
--       with the live leases and their weight, the requests in line, and the
--       time left and owner of the lease in its way (in_the_way(),
--       core/views.lua; -1 and "" when none)
--   {4}
--       gone: asking again with its place (ARGV[5]), out of line, a waiter
--       that kept its place whose ticket ended meanwhile; nothing written
--   {3}
--       frozen: the call's freeze holds (core/admission.lua), the request
--       does not queue and does not override it; nothing was read or written
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- While frozen, a request that queues joins the line (or finds its place or
-- the lease an earlier call made) and is granted nothing unless it
-- overrides the freeze; the fast path is not taken.
--
-- A request that has not queued acquires only when it fits beside the live
-- leases and every waiter (newcomer_fits(), exact at any length of the
-- line), so it never overtakes a queued waiter.
local waiter, join, had = ARGV[3], ARGV[4] == '1', tonumber(ARGV[5])
if FROZEN and not join and held_back(string.match(waiter, '^[^\n]*\n[^\n]*\n(.*)$')) then
  return finish({3})
end
-- A call that may queue may be one of several with its waiter (a retry after
-- a lost reply, a re-check, or a first call that reaches Redis after its
-- retry): it looks up what its id may hold. One that does not queue is the
-- only call with its id, which holds nothing.
local mine, newest_wins
if join then
  mine, newest_wins = string.match(waiter, READ_WAITER_ID_NEWEST)
end
local read = read_fields(mine)

if read[1] and read[4] ~= '1' and newest_wins ~= '1' and not FROZEN and not had then
  -- The fast path: the owners hash exists, nobody waits and leases is empty
  -- (core/leases.lua), so the name has at most its solo lease. (Not for a
  -- newest_wins waiter: it may have been superseded, which only the line's
  -- notes say; nor for a waiter asking again with its place: out of line,
  -- its ticket may have ended.)
  local solo = read[3]
  if solo and mine then
    local expires, token, holder = string.match(solo, READ_SOLO_HEAD)
    if holder == mine and tonumber(expires) > now_ms then
      -- Its own, taken by an earlier call with this waiter (whose reply was
      -- lost): held until its expiry, as that call wrote it.
      return finish({1, tonumber(token), tonumber(expires)})
    end
  end
  if not solo or tonumber(string.match(solo, READ_SOLO_EXPIRES)) <= now_ms then
    -- Free: this lease is written with its full expiry, and the caller
    -- answers it from this reply.
    FENCE = tonumber(read[1])
    guard()
    if solo then
      local expired = parse_solo(solo)
      note_expired(expired)
    end
    local ttl, limit = string.match(waiter, READ_WAITER_TERMS)
    UNTIL, LIMIT_RAW = tonumber(read[2] or '0'), read[6]
    local token, full
    token, full, solo = write_solo(waiter, ttl, limit)
    if EVENTS ~= '' then
      SOLO = parse_solo(solo)
      event('acquired', SOLO.owner, token)
    end
    return finish({1, token, full})
  end
end

local w = waiter_of(waiter)
local id, instance, limit, weight, newest, owner, priority =
  w.id, w.instance, w.limit, w.weight, w.newest == '1', w.owner, w.priority
local packed = take_state(read)
guard()

if OWNED and not SLOW and not join and not fits(SOLO.weight, 0, weight, limit) then
  -- Held by the solo lease, and the request does not wait: busy.
  return finish({0, 1, SOLO.weight, 0, SOLO.score - now_ms, SOLO.owner, 0})
end

local queued = false
if join then
  -- Its own lease, looked up before the solo lease moves (it may be the
  -- solo): a grant to this waiter, confirmed here by its own instance before
  -- the client is told, or the lease an earlier call with this waiter took.
  -- A provisional grant that lapsed is not live any more: this waiter then
  -- rejoins the line below.
  local lease = lease_for(id, packed)
  if lease then
    confirm(id, lease)
    return finish({1, lease.token, lease.expires_at})
  end
  if packed then
    -- Its lease expired: forgotten, so that a new one is not counted twice.
    forget_lease(id, parse_lease(packed))
  end
  -- Queued already (asking again after a missed message, or an earlier call
  -- joined), or superseded meanwhile by a newer newest_wins request.
  queued = redis.call('ZSCORE', K_QUEUE, waiter)
  if not queued and had and ticket_ended(id) then
    -- Out of line, asking again: a waiter that kept its place, whose
    -- ticket ended meanwhile (not collected in time while its instance was
    -- paused, left, expired: core/tickets.lua). It is gone: it neither
    -- rejoins nor is granted anything.
    return finish({4})
  end
  if not queued and newest then
    local by = redis.call('HGET', K_NOTES, 's:' .. id)
    if by then
      redis.call('HDEL', K_NOTES, 's:' .. id)
      return finish({2, by})
    end
  end
end

-- A second lease or a waiter: the solo lease moves into leases first.
unsolo()
local first = first_lease()
local used = used_now(first)
local served = serve_line(used, first ~= nil)
if served > used then
  -- Grants changed which lease ends first.
  used, first = served, first_lease()
end

if queued then
  -- In line already; its entry in byinst too (which a lost byinst key took,
  -- and whose absence would make its instance ask again every second).
  redis.call('ZADD', K_BYINST, '0', instance .. '|' .. waiter)
  return finish({0, 0, 0, 0, (time_left(first, false)), '', 1, tonumber(queued)})
end
if not held_back(w.override) and newcomer_fits(used, weight, limit, priority) then
  -- Written with its full expiry; the caller answers it from this reply.
  local token, full = grant_newcomer(waiter, w, used)
  return finish({1, token, full})
end
if not join then
  local expires_in, in_way_owner = in_the_way(first, true)
  return finish({0, holders(), used, waiting(), expires_in, in_way_owner, 0})
end

local superseded = false
if newest then
  local older = redis.call('HGET', K_NOTES, 'newest')
  if older and redis.call('ZSCORE', K_QUEUE, older) then
    local older_id, older_tag, older_instance, _, _, older_weight, _, older_priority, older_owner =
      unpack_waiter(older)
    remove_waiter(older, older_instance, tonumber(older_weight), '1', tonumber(older_priority))
    redis.call('HSET', K_NOTES, 's:' .. older_id, owner)
    tell(older_instance, 's ' .. older_tag .. ' ' .. owner)
    event('left', older_owner)
    superseded = true
  end
end
-- Last in line among its priority: a seq after theirs, in joining order;
-- or, asking again, the place it had (ARGV[5]), when that is earlier and of
-- its priority (within half a step of its band, as seq() looks).
local place, first_here = seq(priority)
local back = false
if had and had < place and math.abs(had - (now_us - priority * PRIORITY_STEP)) < PRIORITY_STEP / 2 then
  place, back = had, true
end
if redis.call('ZADD', K_QUEUE, num(place), waiter) == 1 then
  count_queued(1, weight, priority, limit)
end
redis.call('ZADD', K_BYINST, '0', instance .. '|' .. waiter)
redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), instance)
QUEUE_EMPTY = false
if newest then
  redis.call('HSET', K_NOTES, 'newest', waiter)
end
if not SLOW then
  -- The fast path must see the line (a name with waiters but no lease).
  redis.call('HSET', K_OWNERS, 'slow', '1')
  SLOW = true
  if UNTIL == 0 then
    keep_leases(now_ms, false)
  end
end
if first_here or newest then
  -- The line's keys may be new: they get their TTL (the keep-alives keep it).
  touch_line()
end
event('queued', owner)
if superseded or back then
  -- A superseded waiter ahead may have left room (with mixed limits), and a
  -- waiter back in its place may fit there (newcomer_fits() judged it at the
  -- back of its priority).
  serve_line(used, true)
  local lease = live_lease(id)
  if lease then
    return finish({1, lease.token, lease.expires_at})
  end
end
return finish({0, 0, 0, 0, (time_left(first, false)), '', 1, place})
