-- The lease core, part 9: admission and serving. Who may take a lease now,
-- and the hand-off to the line whenever room is made.
--
-- One model for every kind: a lease has a weight, and every acquisition
-- carries the limit it is judged against. A request fits when the weight in
-- use, plus the weight of the waiters ahead of it, plus its own, is at most
-- its limit (fits()). The HTTP layer names the cases:
--   * an exclusive lock: weight FULL of limit FULL (held alone);
--   * a shared lock: weight 1 of limit FULL (any number together, none
--     beside an exclusive one, none overtaking a queued exclusive one);
--   * a semaphore lease: weight `permits` (1 by default) of `limit`.
-- Every operation that can make room ends by serving the line
-- (serve_line()): it grants, in line order, to every waiter that fits. A
-- request that has not queued is admitted only when it fits beside the
-- leases and the whole line (newcomer_fits()), so it never overtakes a
-- waiter.
--
-- The line's sums ("queued" in owners, state.lua): every call that adds a
-- waiter to the queue or takes one out changes them by what ZADD or ZREM
-- says it changed (count_queued()), so a join, a grant, a leave, a give-up,
-- a supersede and a prune each count once however often they are asked.
-- They are set from the line whenever a call sees all of it (serve_line()),
-- so they are exact again once the line is short. A queue key lost or
-- expired with waiters in it (or a lost owners hash) leaves a queue whose
-- size is not the sums' count: the next keep-alive makes them the queue's
-- again (keep_alive.lua, which also tells every instance's waiters of the
-- loss). Until then they are not trusted: only while their count is the
-- queue's size (newcomer_fits()); a newcomer is refused while it is not.
-- Priority changes only the line's order (a waiter of higher priority is
-- ahead of every lower one: its seq, state.lua): the rule stays this
-- one. A newcomer of priority p is judged as if it joined: behind the
-- waiters of priority p and above, ahead of the others. So its "ahead" is
-- the weight of those (serve_line() counts it for the waiters it looked at,
-- which come in that order; the line's sums keep it for each priority above
-- 0, "ranked", for a line longer than one call looks at).
--
-- A waiter is never both in line and holding a lease: a grant takes it out
-- of the line in the same call, and an acquire that may queue (one of
-- possibly several calls with the same waiter: a retry after a lost reply,
-- a re-check, or a first call that reaches Redis after its retry) looks up
-- its own lease, solo or in leases, and its place before anything else, so
-- it finds what an earlier call made instead of queuing behind it or
-- taking it twice. A waiter that leaves ("leave", an abandoned acquisition)
-- gives back both its place and its lease all the same.
--
-- What makes a 201 true (docs/design.md, "What makes a 201 true"): a client is
-- told it holds a lease only from a reply that says Redis holds it until the
-- expiry told, and that stays so because:
--   * a lease is live while its expiry (its score, or the solo's field) is
--     after Redis's clock (lease_of()), and only its holder's refresh moves a
--     live lease's expiry; confirm() gives a provisional grant its full expiry
--     only in a call that found it live, so a grant that lapsed while its
--     instance was paused or Redis stalled is never confirmed (its waiter
--     rejoins instead);
--   * a grant to the caller's own waiter (G) or to the caller itself is
--     written with its full expiry: the caller answers it from this call's reply;
--   * a grant is made only when it fits (fits()) beside the live leases: the
--     weight in use counts every lease not yet pruned, expired or not, so it
--     is never less than the live weight (used_now());
--   * guard() runs first in every function that may grant, and nothing after
--     the first write can fail, so a refused call changes nothing;
--   * a keep-alive tells its instance when the line holds fewer of its
--     waiters than it has, so a waiter dropped from the line rejoins it.
--
-- What a hand-off costs: a waiter's join looks up its own place (its lease
-- comes with the hash), looks at the first lease and the last seq, and
-- writes its place and the line's sums; a release reads its lease and the
-- fence in one call, grants the head of the line (the sums written with the
-- new lease) and drops its own lease.

-- The one admission rule: `weight` more fits beside `used` in use and
-- `ahead` queued before it, judged against its own `limit`.
local function fits(used, ahead, weight, limit)
  return used + ahead + weight <= limit
end

-- Freezes: while the call's freeze holds (FROZEN, state.lua: Redis's clock
-- inside the window the caller's instance sent, or past when its list of
-- freezes stopped being fresh), nothing is granted but to a
-- request that overrides it (its waiter's `override`, an administrator's
-- reason). Those held back keep their place in line and weigh nothing ahead
-- of an override meanwhile (serve_line()), so overrides are served in line
-- order among themselves; when the window ends, the next call that serves
-- the line (a keep-alive of an instance with waiters, about every second)
-- serves everyone in line order. A name no freeze matches carries none:
-- FROZEN is false and nothing here costs a command.
local function held_back(override)
  return FROZEN and override == ''
end

-- Grants to every waiter that fits, in line order, `used` being the weight
-- of the live leases: the waiter fits when fits(used, the weight of those
-- still waiting ahead of it, its weight, its limit). A waiter whose
-- instance is dead leaves instead. At most SCAN_BATCH waiters are looked at,
-- so one call stays bounded, and the scan stops once nothing can fit any
-- more (an exclusive lease held or queued). Each grant is told to the
-- waiter's instance: final for the caller's own (it answers its client now),
-- provisional for another's. `kept` says whether the leases key exists for
-- sure (else the first grant may make it, and gives it its TTL). Returns the
-- weight in use afterwards; sets QUEUE_EMPTY, AHEAD and AHEAD_ALL (and
-- AHEAD_RANKED and LOWEST: what a newcomer of a priority has ahead), and the
-- line's sums when it saw the whole line.
local function serve_line(used, kept)
  AHEAD, AHEAD_ALL, AHEAD_RANKED, LOWEST = 0, false, nil, 10
  if used >= FULL then
    return used
  end
  local position, ahead, looked, granted, batch = 0, 0, 0, 0, 1
  -- The weight of those held back by a freeze (held_back()), and the
  -- largest limit among those left in line.
  local skipped, largest = 0, 0
  -- Past SCAN_BATCH, up to LOOK_MAX while a waiter further may fit: one of a
  -- larger limit behind many of smaller ones (QUEUED_L, the largest limit in
  -- line, is above what is used and ahead), else nothing would look at it.
  while looked < SCAN_BATCH or (looked < LOOK_MAX and used + ahead < QUEUED_L) do
    local head = redis.call('ZRANGE', K_QUEUE, num(position), num(position + batch - 1),
      'WITHSCORES')
    if #head == 0 then
      QUEUE_EMPTY, AHEAD_ALL = position == 0, true
      set_queued(position, ahead + skipped, AHEAD_RANKED, largest)
      break
    end
    local full = false
    for i = 1, #head, 2 do
      local waiter = head[i]
      looked = looked + 1
      local w = waiter_of(waiter)
      if not alive(w.instance) and orphan_kept(waiter, w) then
        -- Its instance is gone, but it keeps its place: a ticket now.
        waiter = w.member
      end
      local instance, weight, priority = w.instance, w.weight, w.priority
      LOWEST = priority
      if not alive(instance) then
        remove_waiter(waiter, instance, weight, w.newest, priority)
        event('left', w.owner)
      elseif held_back(w.override) then
        -- Keeps its place; weighs nothing ahead of an override (but the
        -- line's sums count it, and a newcomer of a priority above 0, an
        -- override then, counts it ahead: the safe side).
        position, skipped, HELD_BACK = position + 1, skipped + weight, true
        largest = math.max(largest, w.limit)
        if priority > 0 then
          AHEAD_RANKED = add_ranked(AHEAD_RANKED, priority, 1, weight)
        end
      elseif fits(used, ahead, weight, w.limit) then
        remove_waiter(waiter, instance, weight, w.newest, priority)
        local mine = instance == ME
        w.waited = math.max(0, now_ms - joined_ms(tonumber(head[i + 1]), priority))
        -- A ticket's grant is held for its pickup (core/tickets.lua).
        w.pickup = ticket_pickup(instance)
        -- A waiter of another instance that keeps its place keeps its grant
        -- as long as a ticket would, and its place should it lapse
        -- (kept_hold(), core/tickets.lua).
        local hold = not mine and not w.pickup and kept_hold(w.id, waiter, tonumber(head[i + 1]))
          or nil
        local token, expires_at, expires = write_lease(w, not mine, not kept and granted == 0,
          hold)
        used, granted = used + weight, granted + 1
        if w.pickup then
          -- Nobody waits on it: its turn notice, if it asked one, is due.
          notice_due(w.id, expires)
        else
          tell(instance, (mine and 'G ' or 'g ') .. w.tag .. ' ' .. num(token) .. ' ' ..
            num(expires_at) .. ' ' .. num(expires - now_ms))
        end
        if mine then
          -- Another instance's grant is announced when it is confirmed.
          event('acquired', w.owner, token)
        end
      else
        position, ahead = position + 1, ahead + weight
        largest = math.max(largest, w.limit)
        if priority > 0 then
          AHEAD_RANKED = add_ranked(AHEAD_RANKED, priority, 1, weight)
        end
      end
      if used + ahead >= FULL then
        full = true
        break
      end
    end
    if full then
      break
    end
    batch = SCAN_BATCH
  end
  AHEAD = ahead
  return used
end

-- The weight serve_line() left in line at `priority` and above.
local function ahead_from(priority)
  if priority == 0 then
    return AHEAD
  end
  return ranked_from(AHEAD_RANKED, priority)
end

-- Whether a request of `priority` that has not queued may take `weight` of
-- `limit` now, `used` in use, after serve_line(): it fits beside the leases
-- and every waiter of its priority and above, so it never overtakes one.
-- Exact at any length of the line: the waiters serve_line() looked at come
-- first (the line is in priority order), so it saw all of those ahead when
-- it saw the whole line or one of a lower priority (LOWEST); else what it
-- did not look at is counted by the line's sums, while they count the
-- whole queue (a ZCARD, only for a line longer than a call looks at); else
-- it is refused, as one that may not fit.
local function newcomer_fits(used, weight, limit, priority)
  if QUEUE_EMPTY then
    return fits(used, 0, weight, limit)
  end
  local ahead = ahead_from(priority)
  local seen = AHEAD_ALL or LOWEST < priority
  if seen or not fits(used, ahead, weight, limit) then
    -- All of those ahead were seen, or what was seen is too much already.
    return seen and fits(used, ahead, weight, limit)
  end
  return QUEUED_N == waiting() and fits(used, queued_from(priority), weight, limit)
end

-- Grants a request that has not queued (or no longer is), `waiter` as
-- acquire.lua takes it (`w` its fields, waiter_of()), written with its full
-- expiry (write_lease_for()): the caller answers it from this call's reply.
-- Returns the token and the expiry.
local function grant_newcomer(waiter, w, used)
  local token, full = write_lease_for(waiter, w, used)
  event('acquired', w.owner, token)
  return token, full
end
