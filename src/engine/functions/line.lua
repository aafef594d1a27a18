-- The lease core shared by every operation of both kinds: the first part of
-- the Redis Functions library that scripts.rs makes of this file and one
-- function per operation's file, so the line is written once. The library is
-- loaded once; each call of an operation begins with begin(KEYS, ARGV).
--
-- A lock is a semaphore whose every acquisition carries limit 1; the kinds
-- differ only in their hash tag ({lock:NAME} or {sem:NAME}) and in what the
-- service shows of them.
--
-- KEYS, the same for every operation, all under one hash tag:
--   KEYS[1] leases    zset: lease id -> the expiry Redis enforces (ms, Redis clock):
--                     the full one, or, for a grant that the waiter's instance has
--                     not confirmed yet, at most CONFIRM_MS away, so that a grant to
--                     a waiter whose instance died frees itself within seconds
--   KEYS[2] owners    hash: lease id -> "token|ttl_ms|limit|expires_ms|full_ms|owner"
--                     (expires_ms: its score in leases; full_ms: the full expiry
--                     while provisional, 0 once confirmed); "limit": the limit of
--                     the latest acquisition; "fence": the latest fencing token;
--                     "until": when leases and owners expire (ms)
--   KEYS[3] queue     zset: waiter -> ticket. A waiter is
--                     "id|tag|instance|ttl_ms|limit|newest|owner", written by the
--                     caller (lease.rs), read here (tag: a number naming the waiter
--                     on its instance; newest: 1 when it asked newest_wins); its
--                     ticket is max(last ticket + 1, now in microseconds), so the
--                     line is in joining order whichever instance a waiter is on
--   KEYS[4] byinst    zset, all scores 0: "instance|waiter", each instance's waiters
--   KEYS[5] instances zset: instance id -> alive until (ms); kept fresh by that
--                     instance's keep-alive about every second
--   KEYS[6] notes     hash: "newest" -> the queued newest_wins waiter; "s:ID" -> the
--                     owner of the request that superseded waiter ID, for as long as
--                     the line lives (a waiter that missed the message learns it
--                     there, and never rejoins)
-- ARGV, the first six of every operation:
--   ARGV[1] kind: "lock" or "semaphore" (for events)
--   ARGV[2] the name (for events)
--   ARGV[3] the name's channel (prefix{lock:NAME}:events): messages for the
--           instances that have waiters on the name
--   ARGV[4] the command that publishes on it: "SPUBLISH" on a cluster (the
--           channel's shard only), "PUBLISH" elsewhere
--   ARGV[5] the events channel (prefix + "events"): one JSON change event per change
--   ARGV[6] the caller's instance id
--
-- Messages for an instance about its waiters, fields separated by one space; the
-- caller's own come back in the reply (finish()), the others' go out on the
-- name's channel:
--   G TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS   waiter TAG was granted a lease with
--                                             that token, expiry and time left
--   g TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS   the same, provisional: Redis lets it go
--                                             in EXPIRES_IN_MS unless its instance
--                                             confirms it, which that instance does
--                                             (acquire.lua with the waiter's id)
--                                             before it answers its client
--   s TAG OWNER                               waiter TAG was superseded by a newer
--                                             newest_wins request of OWNER ("" none)
--   x EXPIRES_IN_MS                           a lease now ends sooner: wake the line then
--
-- Every serving operation ends its reply with finish(): the expired leases it
-- noticed (n, then n pairs owner ("" none), fencing_token, for the audit log),
-- then the messages for the caller's waiters (m, then m messages).
--
-- What makes a 201 true (docs/design.md, "What makes a 201 true"): a client is
-- told it holds a lease only from a reply that says Redis holds it until the
-- expiry told, and that stays so because:
--   * a lease is live while its score (the expiry Redis enforces) is after
--     Redis's clock (lease_of()), and only its holder's refresh moves a live
--     lease's expiry; confirm() gives a provisional grant its full expiry
--     only in a call that found it live, so a grant that lapsed while its
--     instance was paused or Redis stalled is never confirmed (its waiter
--     rejoins instead);
--   * a grant to the caller's own waiter (G) is written with its full expiry:
--     the caller answers it from this call's reply;
--   * guard() runs first in every function that may grant, and nothing after
--     the first write can fail, so a refused call changes nothing;
--   * a keep-alive tells its instance when the line holds fewer of its
--     waiters than it has, so a waiter dropped from the line rejoins it.
--
-- Every key gets a TTL: leases and owners (with the fence) outlive the longest
-- lease by at least KEEP_MS, the line's keys LINE_TTL_MS past the last call
-- that touched them (the keep-alives touch them every second while anyone
-- waits). Tokens stay strictly increasing without the fence (docs/design.md):
-- each is max(fence + 1, now in microseconds).
--
-- What a hand-off costs is what these operations do: a waiter's join
-- looks at the first lease, the last ticket, and writes its place; a release
-- reads its lease and the fence in one call, grants the head of the line and
-- drops its own lease. Pruning what expired or died is checked with one read
-- and done only when there is something to prune.
local ALIVE_MS = 3000        -- an instance not heard of for this long is dead
local CONFIRM_MS = 3000      -- an unconfirmed grant lives at most this long
local LINE_TTL_MS = 10000    -- the line's keys outlive the last touch by this
local KEEP_MS = 60000        -- leases, owners and the fence outlive every lease by this
local PRUNE_BATCH = 100      -- expired leases or dead waiters removed per call, at most
local SCAN_BATCH = 100       -- waiters looked at per call for a semaphore grant
local MAX_SAFE = 9007199254740991 -- 2^53 - 1: Lua numbers are exact up to here

-- What one call works on, set by begin(): the library's functions are made
-- once, when it is loaded, and Redis runs one call at a time.
local K_LEASES, K_OWNERS, K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES
local KIND, NAME, NAME_CHANNEL, NAME_PUBLISH, EVENTS, ME
-- Redis's clock at the start of the call; NOW_MS as Redis takes it in
-- arguments (as strings: Redis 7.0 formats a Lua number with "%.17g", which
-- costs more than the command it is an argument of).
local now_us, now_ms, NOW_MS
-- Expired leases this call removed (owner, token, owner, token, ...), and the
-- messages for the caller's own waiters.
local NOTICED, MESSAGES
-- Whether anyone listens on the events channel (nil: not asked yet).
local WATCHED
-- The owners hash's "fence" and "until" fields, once read (nil: not yet):
-- read once per call, kept in step with what the call writes.
local FENCE, UNTIL
-- Whether serve_line() found the line empty.
local QUEUE_EMPTY

-- Every call begins here: its keys, its first six arguments, the clock.
local function begin(keys, args)
  K_LEASES, K_OWNERS, K_QUEUE = keys[1], keys[2], keys[3]
  K_BYINST, K_INSTANCES, K_NOTES = keys[4], keys[5], keys[6]
  KIND, NAME, NAME_CHANNEL, NAME_PUBLISH, EVENTS, ME =
    args[1], args[2], args[3], args[4], args[5], args[6]
  local clock = redis.call('TIME')
  now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  now_ms = math.floor(now_us / 1000)
  NOW_MS = string.format('%d', now_ms)
  NOTICED, MESSAGES = {}, {}
  WATCHED, FENCE, UNTIL, QUEUE_EMPTY = nil, nil, nil, false
end

local function num(n)
  return string.format('%d', n)
end

local function unpack_lease(packed)
  -- token, ttl_ms, limit, expires_ms, full_ms (0: confirmed), owner
  return string.match(packed, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
end

local function unpack_waiter(waiter)
  -- id, tag, instance, ttl_ms, limit, newest, owner
  return string.match(waiter, '^([^|]*)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d)|(.*)$')
end

-- `reply` with what the caller must hear besides it (see above).
local function finish(reply)
  reply[#reply + 1] = #NOTICED / 2
  for _, v in ipairs(NOTICED) do
    reply[#reply + 1] = v
  end
  reply[#reply + 1] = #MESSAGES
  for _, m in ipairs(MESSAGES) do
    reply[#reply + 1] = m
  end
  return reply
end

-- Tells `instance` about one of its waiters: the caller in its reply, any
-- other on the name's channel.
local function tell(instance, message)
  if instance == ME then
    MESSAGES[#MESSAGES + 1] = message
  else
    redis.call(NAME_PUBLISH, NAME_CHANNEL, message)
  end
end

-- Live leases: the count of those not yet expired.
local function holders()
  return redis.call('ZCOUNT', K_LEASES, '(' .. NOW_MS, '+inf')
end

local function waiting()
  return redis.call('ZCARD', K_QUEUE)
end

-- Whether anyone listens on the events channel: asked once per call, and only
-- when there is an event to publish. A cluster always publishes: a node counts
-- only its own subscribers, and PUBLISH reaches every node's.
local function watched()
  if WATCHED == nil then
    WATCHED = NAME_PUBLISH == 'SPUBLISH' or redis.call('PUBSUB', 'NUMSUB', EVENTS)[2] > 0
  end
  return WATCHED
end

-- One JSON change event on the events channel, while anyone listens; lease
-- ids never appear. A semaphore's event shows `held` live leases, or as many
-- as there are.
local function event(what, owner, token, held)
  if not watched() then
    return
  end
  local json = '{"event":"' .. what .. '","kind":"' .. KIND .. '","name":' .. cjson.encode(NAME)
  if owner and owner ~= '' then
    json = json .. ',"owner":' .. cjson.encode(owner)
  end
  if token then
    json = json .. ',"fencing_token":' .. num(token)
  end
  if KIND == 'semaphore' then
    json = json .. ',"holders":' .. num(held or holders())
  end
  redis.call('PUBLISH', EVENTS, json .. ',"waiting":' .. num(waiting()) .. '}')
end

-- The line's keys live LINE_TTL_MS past the last touch.
local function touch_line()
  for _, key in ipairs({K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES}) do
    redis.call('PEXPIRE', key, num(LINE_TTL_MS))
  end
end

-- The live lease of `id` from its packed fields (HGET owners id): a table, or
-- nil when `id` holds none.
local function lease_of(packed)
  if not packed then
    return nil
  end
  local token, ttl, limit, expires, full, owner = unpack_lease(packed)
  if tonumber(expires) <= now_ms then
    return nil
  end
  local provisional = full ~= '0'
  return {token = tonumber(token), ttl = tonumber(ttl), limit = tonumber(limit),
    score = tonumber(expires), expires_at = tonumber(provisional and full or expires),
    owner = owner, provisional = provisional}
end

local function live_lease(id)
  return lease_of(redis.call('HGET', K_OWNERS, id))
end

local function pack_lease(token, ttl, limit, expires, full, owner)
  return num(token) .. '|' .. num(ttl) .. '|' .. num(limit) .. '|' .. num(expires) .. '|' ..
    num(full) .. '|' .. owner
end

-- The waiter's instance confirms a grant before it answers its client: the
-- lease gets its full expiry now, while it is still live (lease_of() said so
-- in this same call), so Redis holds it until the expires_at the client is
-- told. Its "acquired" event is published now, not at the grant.
local function confirm(id, lease)
  if lease.provisional then
    redis.call('ZADD', K_LEASES, 'XX', num(lease.expires_at), id)
    redis.call('HSET', K_OWNERS, id, pack_lease(lease.token, lease.ttl, lease.limit,
      lease.expires_at, 0, lease.owner))
    lease.provisional, lease.score = false, lease.expires_at
    event('acquired', lease.owner, lease.token)
  end
end

-- Reads `id`'s packed lease with the fence and until fields, in one call.
local function read_owners(id)
  local read = redis.call('HMGET', K_OWNERS, id, 'fence', 'until')
  FENCE, UNTIL = tonumber(read[2] or '0'), tonumber(read[3] or '0')
  return read[1]
end

-- The first thing every operation that may grant does, before any write:
-- Redis does not roll back a function that fails half-way, so a refusal
-- must come while nothing has changed. It refuses when the tokens this call
-- could take (at most one per waiter it looks at, and one of its own) might
-- pass 2^53, where Lua numbers stop being exact. Reads the fence and until
-- fields for the call, with `id`'s packed lease when `id` is given (returned).
local function guard(id)
  local packed
  if id then
    packed = read_owners(id)
  else
    local read = redis.call('HMGET', K_OWNERS, 'fence', 'until')
    FENCE, UNTIL = tonumber(read[1] or '0'), tonumber(read[2] or '0')
  end
  if math.max(FENCE, now_us) + SCAN_BATCH + 1 > MAX_SAFE then
    error({err = 'BATON fencing counter near 2^53: tokens can no longer grow exactly; nothing was changed'})
  end
  return packed
end

-- Leases and owners (with the fence) outlive `full` (ms) by KEEP_MS at least;
-- when extended, by twice that, so that the next leases need nothing for a
-- while. `fresh`: the leases key may be new, and then needs its TTL.
local function keep_leases(full, fresh)
  if full + KEEP_MS > UNTIL then
    UNTIL = full + 2 * KEEP_MS
    redis.call('HSET', K_OWNERS, 'until', num(UNTIL))
    redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  elseif fresh then
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  end
end

-- Writes a new lease, taking the next fencing token; provisional for a waiter
-- of another instance. `fresh` says whether the leases key may be new (it had
-- no live lease). Returns the token and the full and the enforced expiry.
-- Every caller ran guard() first, so FENCE is known and the token stays exact.
local function write_lease(id, ttl, limit, owner, provisional, fresh)
  local token = FENCE + 1
  if token < now_us then
    token = now_us
  end
  local full = now_ms + ttl
  local expires, marker = full, 0
  if provisional then
    expires, marker = math.min(full, now_ms + CONFIRM_MS), full
  end
  redis.call('ZADD', K_LEASES, num(expires), id)
  redis.call('HSET', K_OWNERS, id, pack_lease(token, ttl, limit, expires, marker, owner),
    'limit', num(limit), 'fence', num(token))
  keep_leases(full, fresh)
  FENCE = token
  return token, full, expires
end

-- Takes `waiter` (its fields unpacked) out of the line.
local function remove_waiter(waiter, instance, newest)
  redis.call('ZREM', K_QUEUE, waiter)
  redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  if newest == '1' and redis.call('HGET', K_NOTES, 'newest') == waiter then
    redis.call('HDEL', K_NOTES, 'newest')
  end
end

-- Leases past their expiry end; at most PRUNE_BATCH per call. Each lease is
-- pruned once after being granted once, so the work is amortised over the
-- grants, and the batch bounds one call; holders() counts live leases only,
-- so a lease left for a later call is never mistaken for a live one.
local function end_expired()
  local gone = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW_MS, 'LIMIT', '0', num(PRUNE_BATCH))
  for i = 1, #gone do
    local packed = redis.call('HGET', K_OWNERS, gone[i])
    redis.call('ZREM', K_LEASES, gone[i])
    redis.call('HDEL', K_OWNERS, gone[i])
    if packed then
      local token, _, _, _, _, owner = unpack_lease(packed)
      NOTICED[#NOTICED + 1] = owner
      NOTICED[#NOTICED + 1] = tonumber(token)
      event('expired', owner, tonumber(token))
    end
  end
end

-- The lease that ends first: {id, expiry}, or nil when none is held; ends the
-- expired ones first (they sort first), so what it returns is live.
-- `peeked`: that ZRANGE's reply, when the caller read it already.
local function first_lease(peeked)
  local first = peeked or redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')
  if #first > 0 and tonumber(first[2]) <= now_ms then
    end_expired()
    first = redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')
  end
  if #first == 0 then
    return nil
  end
  return {first[1], tonumber(first[2])}
end

-- Whether `instance` keeps its waiters alive (the caller does: it is calling).
local function alive(instance)
  if instance == ME then
    return true
  end
  local alive_until = redis.call('ZSCORE', K_INSTANCES, instance)
  return alive_until ~= false and tonumber(alive_until) > now_ms
end

-- Waiters of instances that stopped keeping them alive leave the line; at
-- most PRUNE_BATCH per call.
local function drop_dead_instances()
  local first = redis.call('ZRANGE', K_INSTANCES, '0', '0', 'WITHSCORES')
  if #first == 0 or tonumber(first[2]) > now_ms then
    return
  end
  local dead = redis.call('ZRANGEBYSCORE', K_INSTANCES, '-inf', NOW_MS, 'LIMIT', '0', '10')
  local budget = PRUNE_BATCH
  for _, instance in ipairs(dead) do
    local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. instance .. '|',
      '[' .. instance .. '|\255', 'LIMIT', 0, budget)
    for _, member in ipairs(members) do
      local waiter = string.sub(member, #instance + 2)
      local _, _, _, _, _, newest, owner = unpack_waiter(waiter)
      remove_waiter(waiter, instance, newest)
      event('left', owner)
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

-- Grants to every waiter that fits, in line order, `held` live leases being
-- held: the waiter at 0-based position i fits when held + i < its own limit
-- (those ahead of it are holders or still waiters either way). A waiter whose
-- instance is dead leaves instead. At most SCAN_BATCH waiters are looked at,
-- so one call stays bounded; a lock stops at its first grant. Each grant is
-- told to the waiter's instance: final for the caller's own (it answers its
-- client now), provisional for another's. `kept` says whether the leases key
-- exists for sure (else the first grant may make it, and gives it its TTL).
-- Returns the live leases afterwards.
local function serve_line(held, kept)
  if KIND == 'lock' and held > 0 then
    return held
  end
  local batch = KIND == 'lock' and 1 or SCAN_BATCH
  local position, granted, looked = 0, 0, 0
  while looked < SCAN_BATCH do
    local head = redis.call('ZRANGE', K_QUEUE, num(position), num(position + batch - 1))
    if #head == 0 then
      QUEUE_EMPTY = position == 0
      break
    end
    for _, waiter in ipairs(head) do
      looked = looked + 1
      local id, tag, instance, ttl, limit, newest, owner = unpack_waiter(waiter)
      if not alive(instance) then
        remove_waiter(waiter, instance, newest)
        event('left', owner)
      elseif held + granted + position < tonumber(limit) then
        remove_waiter(waiter, instance, newest)
        local mine = instance == ME
        local token, full, expires = write_lease(id, tonumber(ttl), tonumber(limit), owner,
          not mine, not kept and granted == 0)
        tell(instance, (mine and 'G ' or 'g ') .. tag .. ' ' .. num(token) .. ' ' .. num(full) ..
          ' ' .. num(expires - now_ms))
        if mine then
          -- Another instance's grant is announced when it is confirmed.
          event('acquired', owner, token)
        end
        granted = granted + 1
      else
        position = position + 1
      end
    end
    if KIND == 'lock' and granted > 0 then
      break
    end
  end
  return held + granted
end

-- Appends the live leases that expire first (at most 100) to `reply`: their
-- count n, then token, expires_in_ms and owner ("" none) of each. A
-- provisional grant shows its full expiry.
local function append_leases(reply)
  local live = redis.call('ZRANGEBYSCORE', K_LEASES, '(' .. NOW_MS, '+inf', 'LIMIT', '0', '100')
  reply[#reply + 1] = #live
  for _, id in ipairs(live) do
    local lease = lease_of(redis.call('HGET', K_OWNERS, id))
    if lease then
      reply[#reply + 1] = lease.token
      reply[#reply + 1] = lease.expires_at - now_ms
      reply[#reply + 1] = lease.owner
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = ''
    end
  end
  return reply
end

-- The earliest live expiry, in ms from now, and its owner ("" when `with_owner`
-- is false, not looked up); -1 and "" when none. `first` is first_lease()'s.
local function next_expiry(first, with_owner)
  if not first then
    return -1, ''
  end
  local owner = ''
  if with_owner then
    local lease = live_lease(first[1])
    owner = lease and lease.owner or ''
  end
  return first[2] - now_ms, owner
end
