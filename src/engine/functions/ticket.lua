-- Tickets: a place in line that outlives the request (core/tickets.lua;
-- core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  mode:
--            "take"    a request that keeps its place and does not wait:
--                      acquires when it fits now (as acquire.lua would),
--                      else joins the line as a ticket
--            "adopt"   a waiting request that keeps its place, just queued
--                      (acquire.lua): its record is written
--            "park"    a waiting request that keeps its place ends before
--                      its grant: its place becomes a ticket (or it takes a
--                      lease granted meanwhile; ARGV[8] "1": its client is
--                      gone, and such a lease is held for pickup instead)
--            "resume"  wait again on a ticket (ARGV[8] "1": actively, on
--                      the caller's instance with tag ARGV[5]) or collect
--                      its lease
--            "show"    a ticket's state
--            "leave"   give a ticket up (and its lease, granted and not
--                      collected)
-- ARGV[4]  the ticket (its lease's id)
-- ARGV[5]  the waiter as the line keeps it (take, adopt, park); the tag of
--          the caller's new waiter (resume); "" otherwise
-- ARGV[6]  how long the place is kept (ms); "" for resume: as before
-- ARGV[7]  how long a grant is held for pickup (ms)
-- ARGV[8]  "1" or "0", see the modes
-- ARGV[9]  the turn notice's URL (take, adopt, park: kept with the ticket,
--          core/tickets.lua); "" none (an earlier one is kept)
--
-- Replies, each ended by finish() (core/messages.lua)
--   {0}    no such ticket (gone, left, collected, expired; "park": its
--          ticket ended while it was out of line); "adopt": done
--   {4}    "leave": left the line, or released its lease not collected
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, weight, owner}
--          the lease: Redis holds it until expires_at_ms (written full by
--          this call, or confirmed, or collected: its ttl from now; or, for
--          a retried call, as the call before left it)
--   {2, place, waiting, place_expires_at_ms, waiter}
--          in line at place (1: next) of waiting, kept until
--          place_expires_at_ms; waiter: its entry in line now
--   {3, pickup_by_ms, waiting, place_expires_at_ms, notified_at_ms, notify_error}
--          granted, held for pickup until pickup_by_ms ("show"); its turn
--          notice delivered at notified_at_ms (0: not, or none asked), or
--          why its delivery fails ("" none)
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- Every mode reads and checks before its first write, and serves the line
-- first (a ticket's turn comes with the first call that touches the name).
local mode, id, notify = ARGV[3], ARGV[4], ARGV[9] or ''
local packed = take_state(read_fields(id))
guard()

-- Serves the line; the weight in use afterwards.
local function serve()
  unsolo()
  local first = first_lease()
  return serve_line(used_now(first), first ~= nil)
end

local function waiting_reply(member, expires)
  local rank = redis.call('ZRANK', K_QUEUE, member)
  return finish({2, rank + 1, waiting(), expires, member})
end

-- The live lease `lease` of this ticket, answered: a pending one is
-- collected (its ttl runs from now), a provisional one confirmed, any
-- other (collected before, by a call whose reply was lost) as it is.
local function collect(lease)
  if lease.pending then
    local expires = now_ms + lease.ttl
    redis.call('ZADD', K_LEASES, 'XX', num(expires), id)
    redis.call('HSET', K_OWNERS, id, pack_lease(lease, lease.ttl, expires, 0))
    keep_leases(expires, false)
    if expires < lease.score then
      tell_ends_sooner(expires - now_ms)
    end
    event('acquired', lease.owner, lease.token)
    keep_key_until(tickets_key(), expires)
    return finish({1, lease.token, expires, lease.ttl, lease.limit, lease.weight, lease.owner})
  end
  confirm(id, lease)
  return finish({1, lease.token, lease.expires_at, lease.ttl, lease.limit, lease.weight,
    lease.owner})
end

-- Joins waiter `w` at the back of its priority, as a ticket.
local function join_ticket(w, keep, pickup)
  local expires = now_ms + keep
  local member = ticket_form(w, expires, pickup)
  if redis.call('ZADD', K_QUEUE, num(seq(w.priority)), member) == 1 then
    count_queued(1, w.weight, w.priority, w.limit)
  end
  QUEUE_EMPTY = false
  if not SLOW then
    redis.call('HSET', K_OWNERS, 'slow', '1')
    SLOW = true
  end
  save_ticket(id, {keep = keep, pickup = pickup, expires = expires, member = member,
    notify = notify}, expires)
  event('queued', w.owner)
  return waiting_reply(member, expires)
end

-- Acquires now when `waiter` fits (written full: the caller answers it from
-- this reply), else joins as a ticket.
local function take(waiter, w, used, keep, pickup)
  if not held_back(w.override) and newcomer_fits(used, w.weight, w.limit, w.priority) then
    local token, full = grant_newcomer(waiter, w, used)
    -- Its record too: a call on the ticket (a retry, `baton run --ticket`)
    -- finds this lease.
    save_ticket(id, {keep = keep, pickup = pickup, expires = now_ms + keep, member = waiter},
      now_ms + keep)
    return finish({1, token, full, w.ttl, w.limit, w.weight, w.owner})
  end
  return join_ticket(w, keep, pickup)
end

if mode == 'take' then
  local waiter = ARGV[5]
  local w = waiter_of(waiter)
  local lease = lease_for(id, packed)
  if lease then
    -- Taken by an earlier call with this ticket, whose reply was lost.
    return collect(lease)
  end
  local rec = ticket_record(id)
  if rec and redis.call('ZSCORE', K_QUEUE, rec.member) then
    return waiting_reply(rec.member, rec.expires)
  end
  return take(waiter, w, serve(), tonumber(ARGV[6]), tonumber(ARGV[7]))
end

if mode == 'adopt' then
  local waiter, keep = ARGV[5], tonumber(ARGV[6])
  if redis.call('ZSCORE', K_QUEUE, waiter) then
    local rec = {keep = keep, pickup = tonumber(ARGV[7]), expires = now_ms + keep, member = waiter,
      notify = notify}
    save_ticket(id, rec, rec.expires)
  end
  return finish({0})
end

if mode == 'park' then
  local waiter, keep, pickup, gone = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
  local w = waiter_of(waiter)
  local used = serve()
  local lease = live_lease(id)
  if lease and not gone then
    return collect(lease)
  end
  local rec = ticket_record(id)
  if lease then
    -- Nobody was told of it: held for the ticket's pickup instead.
    local newly = not lease.pending
    if newly then
      local expires = now_ms + pickup
      redis.call('ZADD', K_LEASES, 'XX', num(expires), id)
      redis.call('HSET', K_OWNERS, id, pack_lease(lease, lease.ttl, expires, 1))
      if expires < lease.score then
        tell_ends_sooner(expires - now_ms)
      end
      lease.score = expires
    end
    rec = rec or {member = waiter}
    rec.keep, rec.pickup, rec.expires = keep, pickup, now_ms + keep
    -- (A lease held for pickup before this call keeps its notice as it is.)
    rec.notify = newly and notify or nil
    save_ticket(id, rec, math.max(rec.expires, lease.score))
    if newly then
      notice_due(id, lease.score)
    end
    return finish({0})
  end
  local member = nil
  if redis.call('ZSCORE', K_QUEUE, waiter) then
    member = waiter
  elseif rec and redis.call('ZSCORE', K_QUEUE, rec.member) then
    member = rec.member
  end
  if member then
    local expires = now_ms + keep
    local kept = ticket_form(w, expires, pickup)
    replace_in_line(member, kept)
    local instance = waiter_of(member).instance
    redis.call('ZREM', K_BYINST, instance .. '|' .. member)
    save_ticket(id, {keep = keep, pickup = pickup, expires = expires, member = kept,
      notify = notify}, expires)
    return waiting_reply(kept, expires)
  end
  -- Out of line meanwhile (its instance presumed dead, the line lost): at
  -- the back, as a ticket (or acquired now when it fits and is answered).
  -- Not when its ticket ended meanwhile (not collected in time while its
  -- instance was paused, left, expired: its tombstone, core/tickets.lua):
  -- it is gone, and must not come back. Nor for a client gone with no
  -- record left: its ticket was left (a DELETE that came before this
  -- call).
  if not rec and ticket_ended(id) then
    return finish({0})
  end
  if gone then
    if not rec then
      return finish({0})
    end
    return join_ticket(w, keep, pickup)
  end
  return take(waiter, w, used, keep, pickup)
end

local rec = ticket_record(id)
if not rec then
  return finish({0})
end

if mode == 'resume' then
  serve()
  local lease = live_lease(id)
  if lease then
    return collect(lease)
  end
  local before = rec.member
  if not redis.call('ZSCORE', K_QUEUE, before) then
    forget_ticket(id)
    return finish({0})
  end
  local keep = ARGV[6] ~= '' and tonumber(ARGV[6]) or rec.keep
  local w = waiter_of(before)
  local old_instance = w.instance
  local expires = now_ms + keep
  local member
  if ARGV[8] == '1' then
    w.tag, w.instance = ARGV[5], ME
    member = pack_waiter(w, w.ttl)
    redis.call('ZADD', K_BYINST, '0', ME .. '|' .. member)
    redis.call('ZADD', K_INSTANCES, num(now_ms + ALIVE_MS), ME)
    touch_line()
  else
    member = ticket_form(w, expires, rec.pickup)
  end
  if member ~= before then
    replace_in_line(before, member)
    if string.byte(old_instance, 1) ~= 126 then
      redis.call('ZREM', K_BYINST, old_instance .. '|' .. before)
    end
  end
  rec.keep, rec.expires, rec.member = keep, expires, member
  save_ticket(id, rec, expires)
  return waiting_reply(member, expires)
end

if mode == 'show' then
  serve()
  local lease = live_lease(id)
  if lease then
    if lease.pending or lease.provisional then
      -- Held for its pickup, or granted to the request waiting on it and
      -- not confirmed yet (its instance may be paused): until lease.score.
      local notice = redis.call('HGET', tickets_key(), id .. ':n') or ''
      local at, err = string.match(notice, '^(%d+)|[^\n]*\n?(.*)$')
      return finish({3, lease.score, waiting(), rec.expires, tonumber(at or '0'), err or ''})
    end
    -- Collected: the lease is its holder's now.
    return finish({0})
  end
  if not redis.call('ZSCORE', K_QUEUE, rec.member) then
    forget_ticket(id)
    return finish({0})
  end
  return waiting_reply(rec.member, rec.expires)
end

-- "leave"
unsolo()
local lease = live_lease(id)
if lease and not lease.pending and not lease.provisional then
  -- Collected: the lease is its holder's now (released with its id).
  return finish({0})
end
-- Gone for good: a request waiting on it on an instance paused meanwhile
-- finds its tombstone when it resumes (core/tickets.lua), and does not
-- rejoin. A grant held for its pickup, or to a request waiting on it and
-- not confirmed yet (nobody told of it), is released.
end_ticket(id, rec)
if lease then
  USED, USED_DIRTY = math.max(0, USED - lease.weight), true
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_OWNERS, id)
  remember(lease, 'released', now_ms)
  event('released', lease.owner, lease.token)
elseif redis.call('ZSCORE', K_QUEUE, rec.member) then
  local w = waiter_of(rec.member)
  remove_waiter(rec.member, w.instance, w.weight, w.newest, w.priority)
  event('left', w.owner)
else
  return finish({0})
end
serve()
return finish({4})
