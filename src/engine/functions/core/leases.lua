-- The lease core, part 8: where a name's leases live, and every read and
-- write of them. A name with one lease and nobody waiting keeps that lease
-- in one field of the owners hash, "solo" (the fast path); a second lease
-- or a first waiter moves it into the leases zset (unsolo()) and sets
-- "slow", and the name goes back to the fast path when leases and queue are
-- empty again (save(), persist.lua). Which of the two holds the leases is
-- decided here: the operations ask these accessors (and holders(),
-- state.lua, the count every event shows), and only the fast paths of
-- acquire.lua and release.lua, which run before the state is read, look at
-- the solo field themselves.
--
-- What the common path costs: a free name's acquire reads the owners hash
-- once and writes the solo field once; its release reads the hash and
-- deletes the field (TIME first in each: 3 commands in a call, 8 in a cycle
-- with the two FCALLs).

-- The live lease of `id`: the solo, or one of leases (`packed`: its field).
local function lease_for(id, packed)
  if SOLO and SOLO.id == id then
    return SOLO.live and SOLO or nil
  end
  return lease_of(packed)
end

-- The live lease of `id`, read now.
local function live_lease(id)
  if SOLO and SOLO.id == id then
    return SOLO.live and SOLO or nil
  end
  return lease_of(redis.call('HGET', K_OWNERS, id))
end

-- The lease that ends first: {id, expiry}, or nil when none is held; ends the
-- expired ones first (they sort first), so what it returns is live unless
-- more than PRUNE_BATCH had expired.
local function first_lease()
  if SOLO then
    return SOLO.live and {SOLO.id, SOLO.score} or nil
  end
  local first = redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')
  if #first > 0 and tonumber(first[2]) <= now_ms then
    end_expired()
    first = redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')
  end
  if #first == 0 then
    if USED ~= 0 then
      -- Nothing is left to count: the weight in use is none.
      USED, USED_DIRTY = 0, true
    end
    return nil
  end
  return {first[1], tonumber(first[2])}
end

-- The lease that ends last (a lock's writer waits for it): {id, expiry} or nil.
local function last_lease()
  if SOLO then
    return SOLO.live and {SOLO.id, SOLO.score} or nil
  end
  local last = redis.call('ZRANGE', K_LEASES, '-1', '-1', 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= now_ms then
    return nil
  end
  return {last[1], tonumber(last[2])}
end

-- The weight of the live leases, `first` being first_lease()'s: exact, or
-- more when more than PRUNE_BATCH leases expired at once and some weigh more
-- than 1 (they are pruned by the next calls).
local function used_now(first)
  if SOLO then
    return SOLO.live and SOLO.weight or 0
  end
  if not first then
    return 0
  end
  if first[2] <= now_ms and USED == redis.call('ZCARD', K_LEASES) then
    -- Every lease weighs 1: the live ones are counted.
    return holders()
  end
  return USED
end

-- The weight of the live leases without pruning anything (status): exact
-- unless more than 100 expired leases weigh more than 1 each.
local function used_unpruned()
  if SOLO then
    return SOLO.live and SOLO.weight or 0
  end
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now_arg(), 'LIMIT', '0', '100')
  local used = USED
  for _, id in ipairs(expired) do
    local packed = redis.call('HGET', K_OWNERS, id)
    if packed then
      used = used - parse_lease(packed).weight
    end
  end
  return math.max(used, 0)
end

-- The live leases that expire first, at most `n`, in that order: a list of
-- leases (parse_lease() tables), where false stands for one whose fields
-- were gone or expired by the time they were read.
local function live_leases(n)
  if SOLO then
    return SOLO.live and {SOLO} or EMPTY
  end
  local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '(' .. now_arg(), '+inf', 'LIMIT', '0', num(n))
  for i, id in ipairs(ids) do
    ids[i] = lease_of(redis.call('HGET', K_OWNERS, id)) or false
  end
  return ids
end

-- Moves the solo lease into leases, before the name gets a second lease or
-- a waiter; forgets it when it expired.
local function unsolo()
  if not SOLO then
    return
  end
  redis.call('HDEL', K_OWNERS, 'solo')
  local lease = SOLO
  SOLO = nil
  if lease.live then
    USED, USED_DIRTY = USED + lease.weight, false
    redis.call('ZADD', K_LEASES, num(lease.score), lease.id)
    redis.call('HSET', K_OWNERS, lease.id, pack_lease(lease, lease.ttl, lease.score, 0),
      'used', num(USED), 'slow', '1')
    SLOW = true
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  else
    note_expired(lease)
  end
end

-- Writes a new lease into leases (the solo lease, if any, moves there
-- first) for the request `w` (a table as waiter_of() makes, with `waited`,
-- how long it waited, ms), taking the next fencing token; provisional for a
-- waiter of another instance, for CONFIRM_MS or `hold` ms (a waiter that
-- keeps its place, kept_hold()). `fresh` says whether the leases key may be
-- new (it had no live lease). Returns the token and the full and the
-- enforced expiry.
local function write_lease(w, provisional, fresh, hold)
  unsolo()
  local token = next_token()
  local full = now_ms + w.ttl
  local expires, marker = full, 0
  if w.pickup then
    -- A ticket's: held for its pickup (core/tickets.lua).
    expires, marker = now_ms + w.pickup, 1
  elseif provisional then
    expires, marker = math.min(full, now_ms + (hold or CONFIRM_MS)), full
  end
  w.token, w.acquired = token, now_ms
  USED, USED_DIRTY = USED + w.weight, false
  redis.call('ZADD', K_LEASES, num(expires), w.id)
  local packed = pack_lease(w, w.ttl, expires, marker)
  if RANKED_DIRTY then
    -- (A grant to a waiter of a priority: the line's sums changed with it.)
    redis.call('HSET', K_OWNERS, w.id, packed, 'limit', num(w.limit), 'fence', num(token),
      'used', num(USED), 'slow', '1', 'queued', queued_field(), 'ranked', ranked_field())
    QUEUED_DIRTY, RANKED_DIRTY = false, false
  elseif QUEUED_DIRTY then
    -- (A grant to a waiter: the line's sums changed with it.)
    redis.call('HSET', K_OWNERS, w.id, packed, 'limit', num(w.limit), 'fence', num(token),
      'used', num(USED), 'slow', '1', 'queued', queued_field())
    QUEUED_DIRTY = false
  else
    redis.call('HSET', K_OWNERS, w.id, packed, 'limit', num(w.limit), 'fence', num(token),
      'used', num(USED), 'slow', '1')
  end
  SLOW = true
  keep_leases(math.max(full, expires), fresh)
  return token, full, expires
end

-- Writes the name's only lease as its solo field (leases and queue are
-- empty: see read_state()), for `waiter` (as acquire.lua takes it) with its
-- ttl and limit (as strings); FENCE, UNTIL and LIMIT_RAW are known. Returns
-- the token, the expiry and the field's value (SOLO is not set: a fast path
-- needs none).
local function write_solo(waiter, ttl, limit)
  local token = next_token()
  local full = now_ms + ttl
  local t = num(token)
  local solo = pack_solo(full, t, now_ms, 0, waiter)
  if limit ~= LIMIT_RAW then
    redis.call('HSET', K_OWNERS, 'solo', solo, 'fence', t, 'limit', limit)
  else
    redis.call('HSET', K_OWNERS, 'solo', solo, 'fence', t)
  end
  LIMIT_RAW = limit
  keep_leases(full, false)
  return token, full, solo
end

-- Writes a full lease for `waiter` (as acquire.lua takes it; `w` its
-- fields, waiter_of()), which has not queued (or no longer is), `used` in
-- use: the solo lease when the name has no other and nobody waits, else
-- one of leases. Returns the token and the expiry.
local function write_lease_for(waiter, w, used)
  if used == 0 and USED == 0 and QUEUE_EMPTY and not SOLO then
    local token, full, solo = write_solo(waiter, w.ttl, num(w.limit))
    SOLO = parse_solo(solo)
    return token, full
  end
  w.waited = 0
  local token, full = write_lease(w, false, used == 0)
  return token, full
end

-- Writes `id`'s live lease, `lease`, back with a new ttl and its expiry at
-- `expires_at` (ms), where it lives. Returns whether it now ends sooner in
-- leases (the solo has nobody waiting behind it).
local function rewrite_lease(id, lease, ttl, expires_at)
  if lease == SOLO then
    -- Its waiter's ttl is the lease's own from now on.
    redis.call('HSET', K_OWNERS, 'solo', pack_solo(expires_at, num(lease.token), lease.acquired,
      lease.waited, pack_waiter(lease, ttl)))
    return false
  end
  redis.call('ZADD', K_LEASES, 'XX', num(expires_at), id)
  redis.call('HSET', K_OWNERS, id, pack_lease(lease, ttl, expires_at, 0))
  return expires_at < lease.score
end

-- The waiter's instance confirms a grant before it answers its client: the
-- lease gets its full expiry now, while it is still live (lease_of() said so
-- in this same call), so Redis holds it until the expires_at the client is
-- told. Its "acquired" event is published now, not at the grant. (Only a
-- lease in leases is ever provisional.)
local function confirm(id, lease)
  if lease.provisional then
    redis.call('ZADD', K_LEASES, 'XX', num(lease.expires_at), id)
    redis.call('HSET', K_OWNERS, id, pack_lease(lease, lease.ttl, lease.expires_at, 0))
    lease.provisional, lease.score = false, lease.expires_at
    event('acquired', lease.owner, lease.token)
  end
end

-- Ends every lease of the name, whoever holds it: the solo, or the leases
-- zset unlinked (Redis frees it in the background) with the owners hash
-- started afresh with what outlives the leases (the fence, the latest
-- limit, the line's sums; "slow" stays until save() sees the line empty, so
-- that no fast acquire overtakes a waiter meanwhile). Returns how many live
-- leases it ended, the first of them (at most 100, as live_leases() lists
-- them), and whether the leases key may still exist.
local function end_every_lease()
  if SOLO then
    redis.call('HDEL', K_OWNERS, 'solo')
    local lease = SOLO
    SOLO = nil
    if lease.live then
      return 1, {lease}, false
    end
    note_expired(lease)
  end
  local first = first_lease()
  local count = holders()
  if count == 0 then
    return 0, EMPTY, first ~= nil
  end
  local shown = live_leases(100)
  redis.call('UNLINK', K_LEASES, K_OWNERS)
  -- (Written again by save() while some wait.)
  QUEUED_L_RAW = 0
  -- (Never sooner than before: the line's sums live as long as its tickets.)
  UNTIL, USED, USED_DIRTY, QUEUED_DIRTY = math.max(UNTIL, now_ms + keep_ms() + KEEP_MS), 0, false,
    false
  redis.call('HSET', K_OWNERS, 'limit', num(LIMIT), 'fence', num(FENCE), 'until', num(UNTIL),
    'slow', '1', 'queued', queued_field(), 'ranked', ranked_field())
  RANKED_DIRTY = false
  SLOW = true
  redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
  return count, shown, false
end
