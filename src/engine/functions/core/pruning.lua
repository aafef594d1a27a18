-- The lease core, part 7: pruning what ended without a word. Leases past
-- their expiry leave the leases zset (end_expired(), forget_lease()), and
-- the waiters of instances that stopped keeping them alive (for ALIVE_MS
-- of Redis's serving time: alive_at()) leave the line
-- (drop_dead_instances()); both at most PRUNE_BATCH per call, so one call
-- stays bounded.
--
-- Pruning is amortised: each lease is removed once, by the first call that
-- finds it expired, so over time it costs one removal per grant. What is
-- left for a later call is never mistaken for room: the weight in use
-- counts every lease not yet pruned (used_now(), leases.lua), and a waiter
-- of a dead instance is never granted anything (serve_line(),
-- admission.lua, skips and drops it). Whether there is anything to prune is
-- checked with one read; the work is done only when there is.

-- Whether an instance whose keep-alive made it alive until `alive_until`
-- (its score in instances, ms) is alive now: heard within ALIVE_MS of
-- Redis's serving time. A stall of Redis (stalled_ms(), state.lua) is no
-- sign that an instance died: no keep-alive could reach Redis, so an
-- instance that was on time when Redis stopped serving keeps, once Redis
-- serves again, the time it had left then. (So a dead instance's waiters
-- leave the line ALIVE_MS after its last keep-alive, or, when the node ran
-- no call for more than GAP_MS right after it, at most ALIVE_MS after the
-- call that ended that silence.)
local function alive_at(alive_until)
  return alive_until > now_ms or alive_until + stalled_ms(alive_until - ALIVE_MS) > now_ms
end

-- Whether `instance` keeps its waiters alive (the caller does: it is
-- calling). Asked once per instance in a call (ALIVE): a call that looks at
-- a hundred waiters of a few instances asks Redis a few times, not a
-- hundred; the answer cannot change within the call.
local function alive(instance)
  if instance == ME then
    return true
  end
  if string.byte(instance, 1) == 126 then
    -- "~": a ticket, alive until its place expires (core/tickets.lua).
    return ticket_alive(instance)
  end
  if not ALIVE then
    ALIVE = {}
  end
  local known = ALIVE[instance]
  if known == nil then
    local alive_until = redis.call('ZSCORE', K_INSTANCES, instance)
    known = alive_until ~= false and alive_at(tonumber(alive_until))
    ALIVE[instance] = known
  end
  return known
end

-- A grant to `id` lapsed unconfirmed (provisional: its waiter's instance
-- was paused, or died, before it confirmed it). When the waiter keeps its
-- place (kept_hold() noted the seq it was granted from, and its record
-- still names it, its place not expired), it goes back into line in that
-- place, as it was, or as a ticket there when its instance is presumed
-- dead (orphan_kept(), core/tickets.lua): else a request behind it would
-- be served first, and the instance, resuming, would find its waiter out of
-- line and send it to the back. Its instance, if alive, finds it there when
-- it asks again. One HMGET, only for a grant that lapsed.
local function kept_back(id)
  local key = tickets_key()
  local found = redis.call('HMGET', key, id, id .. ':q')
  local rec, seq = parse_record(found[1]), found[2]
  if not seq then
    return
  end
  redis.call('HDEL', key, id .. ':q')
  if not rec or rec.expires <= now_ms or string.byte(rec.member, 1) == 126
      or redis.call('ZSCORE', K_QUEUE, rec.member) then
    return
  end
  local waiter = rec.member
  local w = waiter_of(waiter)
  if redis.call('ZADD', K_QUEUE, seq, waiter) == 1 then
    count_queued(1, w.weight, w.priority, w.limit)
  end
  redis.call('ZADD', K_BYINST, '0', w.instance .. '|' .. waiter)
  keep_key_until(K_QUEUE, rec.expires)
  QUEUE_EMPTY = false
  if not SLOW then
    redis.call('HSET', K_OWNERS, 'slow', '1')
    SLOW = true
  end
  if not alive(w.instance) then
    orphan_kept(waiter, w)
  end
end

-- Forgets `id`'s lease in leases, `lease` (parse_lease()), which expired:
-- an expired lease is never released, but its weight no longer counts. A
-- grant that lapsed unconfirmed to a waiter that keeps its place puts it
-- back in its place (kept_back()), unless that waiter is `ending` (the
-- caller's own, leaving or giving up: release.lua). A ticket's lease held
-- for its pickup and not collected ends the ticket (end_ticket(),
-- core/tickets.lua: one HGET and its tombstone, only then).
local function forget_lease(id, lease, ending)
  USED, USED_DIRTY = math.max(0, USED - lease.weight), true
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_OWNERS, id)
  note_expired(lease)
  if lease.provisional and not ending then
    kept_back(id)
  end
  if lease.pending then
    -- Held for a ticket's pickup, not collected: the ticket ended.
    local rec = ticket_record(id)
    if rec then
      end_ticket(id, rec)
    end
  end
end

-- A grant to another instance's waiter made just before Redis stopped
-- serving (a stall: stalled_ms(), state.lua) keeps the time it had to be
-- confirmed: its waiter's instance could not confirm it while Redis did
-- not serve, so the time Redis did not serve since the grant is added to
-- its hold and to its full expiry, as if it had been granted when Redis
-- served again (`acquired` moves there too, so the same stall never adds
-- twice). Else the first call after the stall, a newcomer's, would prune it
-- and be served ahead of a waiter whose instance stayed alive (its confirm
-- was waiting behind the stall). Nobody was told of the grant (confirm()
-- tells, with the full expiry written in the same call): no promise moves.
-- Returns whether the grant is kept; only for a grant whose hold ran out.
local function kept_through_stall(id, lease)
  if not lease.provisional then
    return false
  end
  local stalled = stalled_ms(lease.acquired)
  if stalled == 0 or lease.score + stalled <= now_ms then
    return false
  end
  local score, full = lease.score + stalled, lease.expires_at + stalled
  lease.acquired = now_ms
  redis.call('ZADD', K_LEASES, 'XX', num(score), id)
  redis.call('HSET', K_OWNERS, id, pack_lease(lease, lease.ttl, score, full))
  keep_leases(full, false)
  return true
end

-- Leases past their expiry end (a grant held up by a stall of Redis stays:
-- kept_through_stall()); at most PRUNE_BATCH per call. Each lease is
-- pruned once after being granted once, so the work is amortised over the
-- grants, and the batch bounds one call; used_now() counts what is left
-- unpruned as in use, so a lease left for a later call is never mistaken
-- for room.
local function end_expired()
  local gone = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now_arg(), 'LIMIT', '0', num(PRUNE_BATCH))
  for i = 1, #gone do
    local packed = redis.call('HGET', K_OWNERS, gone[i])
    if packed then
      local lease = parse_lease(packed)
      if not kept_through_stall(gone[i], lease) then
        forget_lease(gone[i], lease)
      end
    else
      redis.call('ZREM', K_LEASES, gone[i])
      redis.call('HDEL', K_OWNERS, gone[i])
    end
  end
end

-- Waiters of instances that stopped keeping them alive leave the line; at
-- most PRUNE_BATCH per call. The dead are the first in instances: one
-- heard earlier is never alive when one heard later is dead (alive_at():
-- what the earlier one is forgiven beyond the later one is at most the
-- time Redis did not serve between their keep-alives, which is at most the
-- time between them), so the scan stops at the first live one.
local function drop_dead_instances()
  local first = redis.call('ZRANGE', K_INSTANCES, '0', '0', 'WITHSCORES')
  if #first == 0 or alive_at(tonumber(first[2])) then
    return
  end
  local dead = redis.call('ZRANGEBYSCORE', K_INSTANCES, '-inf', now_arg(), 'LIMIT', '0', '10',
    'WITHSCORES')
  local budget = PRUNE_BATCH
  for i = 1, #dead, 2 do
    local instance = dead[i]
    if alive_at(tonumber(dead[i + 1])) then
      break
    end
    local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. instance .. '|',
      '[' .. instance .. '|\255', 'LIMIT', 0, budget)
    for _, member in ipairs(members) do
      local waiter = string.sub(member, #instance + 2)
      local w = waiter_of(waiter)
      -- (A waiter that keeps its place stays, as a ticket: core/tickets.lua.)
      if not orphan_kept(waiter, w) then
        remove_waiter(waiter, instance, w.weight, w.newest, w.priority)
        event('left', w.owner)
      end
    end
    if #members < budget then
      redis.call('ZREM', K_INSTANCES, instance)
    end
    budget = budget - #members
    if budget <= 0 then
      break
    end
  end
end
