-- The lease core shared by every script of both kinds: loaded in front of each
-- operation's file (scripts.rs), so the line is written once.
--
-- A lock is a semaphore whose every acquisition carries limit 1; the kinds
-- differ only in their hash tag ({lock:NAME} or {sem:NAME}) and in what the
-- service shows of them.
--
-- KEYS, the same for every script, all under one hash tag:
--   KEYS[1] leases    zset: lease id -> expiry (ms, Redis clock). A grant that the
--                     waiter's instance has not confirmed yet has a provisional
--                     expiry (at most CONFIRM_MS away), so a grant to a waiter
--                     whose instance died frees itself within seconds
--   KEYS[2] owners    hash: lease id -> "token|ttl_ms|limit|expires_at_ms|owner"
--                     (expires_at_ms: the lease's full expiry while it is
--                     provisional, 0 once confirmed); field "limit": the limit of
--                     the latest acquisition
--   KEYS[3] queue     zset: waiter id -> ticket (from the fence counter: the order
--                     in which waiters joined, whichever instance they wait on)
--   KEYS[4] waiters   hash: waiter id -> "ticket|tag|instance|ttl_ms|limit|joined_ms|newest|owner"
--                     (tag: a number naming the waiter on its instance, published
--                     instead of its id; newest: 1 when it asked newest_wins);
--                     field "newest": the id of the queued newest_wins waiter;
--                     fields "s:ID": the owner of the request that superseded
--                     waiter ID, for as long as the line lives (a waiter that
--                     missed the message learns it there, and never rejoins)
--   KEYS[5] byinst    zset, all scores 0: "instance|waiter id", each instance's waiters
--   KEYS[6] instances zset: instance id -> alive until (ms); kept fresh by that
--                     instance's keep-alive about every second
--   KEYS[7] fence     counter of tickets and fencing tokens
-- ARGV, the first five of every script:
--   ARGV[1] kind: "lock" or "semaphore" (for events)
--   ARGV[2] the name (for events)
--   ARGV[3] the name's channel (prefix{lock:NAME}:events): messages for the
--           instances that have waiters on the name
--   ARGV[4] the command that publishes on it: "SPUBLISH" on a cluster (the
--           channel's shard only), "PUBLISH" elsewhere
--   ARGV[5] the events channel (prefix + "events"): one JSON change event per change
--
-- Messages on the name's channel, fields separated by one space:
--   g TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS   waiter TAG was granted a lease with
--                                             that token and full expiry; Redis lets
--                                             it go in EXPIRES_IN_MS unless confirmed
--   s TAG OWNER                               waiter TAG was superseded by a newer
--                                             newest_wins request of OWNER ("" none)
--   x EXPIRES_IN_MS                           a lease now ends sooner: wake the line then
--
-- Scripts that remove expired leases end their reply with what they noticed
-- (noticed()): n, then n pairs owner ("" none), fencing_token, for the audit log.
--
-- Every key gets a TTL: leases and owners outlive the longest lease by
-- LINE_TTL_MS (so that a script notices an expiry for the audit), the line's
-- keys LINE_TTL_MS past the last script that touched them (the keep-alives touch
-- them every second while anyone waits), the fence FENCE_SLACK_MS past the
-- longest lease or place in line. Tokens stay strictly increasing without the
-- fence (docs/design.md): each is max(counter + 1, now in microseconds).
local K_LEASES, K_OWNERS, K_QUEUE, K_WAITERS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_BYINST, K_INSTANCES, K_FENCE = KEYS[5], KEYS[6], KEYS[7]
local KIND, NAME, NAME_CHANNEL, NAME_PUBLISH, EVENTS = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local ALIVE_MS = 3000        -- an instance not heard of for this long is dead
local CONFIRM_MS = 3000      -- an unconfirmed grant lives at most this long
local LINE_TTL_MS = 10000    -- the line's keys outlive the last touch by this
local FENCE_SLACK_MS = 60000 -- the fence outlives every lease by this
local PRUNE_BATCH = 100      -- expired leases or dead waiters removed per call, at most
local SCAN_BATCH = 100       -- waiters looked at per call for a semaphore grant
local MAX_SAFE = 9007199254740991 -- 2^53 - 1: Lua numbers are exact up to here

local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local now_ms = math.floor(now_us / 1000)
-- Arguments go to Redis as strings: Redis 7.0 formats a Lua number with
-- "%.17g", which costs more than the command it is an argument of.
local NOW_MS = string.format('%d', now_ms)
-- The exclusive lower bound of live expiries, as ZRANGEBYSCORE takes it.
local AFTER_NOW = '(' .. NOW_MS

local function num(n)
  return string.format('%d', n)
end

local function unpack_lease(packed)
  -- token, ttl_ms, limit, expires_at_ms (0: confirmed), owner
  return string.match(packed, '^(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
end

local function unpack_waiter(packed)
  -- ticket, tag, instance, ttl_ms, limit, joined_ms, newest, owner
  return string.match(packed, '^(%d+)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d+)|(%d)|(.*)$')
end

-- Expired leases this call removed: owner, token, owner, token, ...
local NOTICED = {}

-- `reply` with the expired leases this call noticed appended.
local function noticed(reply)
  reply[#reply + 1] = #NOTICED / 2
  for _, v in ipairs(NOTICED) do
    reply[#reply + 1] = v
  end
  return reply
end

local function holders()
  return redis.call('ZCOUNT', K_LEASES, AFTER_NOW, '+inf')
end

local function waiting()
  return redis.call('ZCARD', K_QUEUE)
end

-- Whether anyone listens on the events channel: asked once per call, and only
-- when there is an event to publish. A cluster always publishes: a node counts
-- only its own subscribers, and PUBLISH reaches every node's.
local WATCHED
local function watched()
  if WATCHED == nil then
    WATCHED = NAME_PUBLISH == 'SPUBLISH' or redis.call('PUBSUB', 'NUMSUB', EVENTS)[2] > 0
  end
  return WATCHED
end

-- One JSON change event on the events channel, while anyone listens; lease
-- ids never appear.
local function event(what, owner, token)
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
    json = json .. ',"holders":' .. num(holders())
  end
  redis.call('PUBLISH', EVENTS, json .. ',"waiting":' .. num(waiting()) .. '}')
end

local function extend(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, num(ms))
  end
end

-- Leases and owners live at least `ms` more. They are written together and
-- always given the same TTL together, so the leases' TTL speaks for both
-- (owners outlives an emptied leases zset, never the other way round).
local function extend_leases(ms)
  if redis.call('PTTL', K_LEASES) < ms then
    redis.call('PEXPIRE', K_LEASES, num(ms))
    redis.call('PEXPIRE', K_OWNERS, num(ms))
  end
end

-- The line's keys live LINE_TTL_MS past the last touch.
local function touch_line()
  for _, key in ipairs({K_QUEUE, K_WAITERS, K_BYINST, K_INSTANCES}) do
    redis.call('PEXPIRE', key, num(LINE_TTL_MS))
  end
end

-- The next ticket or fencing token; checked before anything is written with it.
local function next_token(lives_ms)
  local token = tonumber(redis.call('GET', K_FENCE) or '0') + 1
  if token < now_us then
    token = now_us
  end
  if token > MAX_SAFE then
    error({err = 'BATON fencing counter past 2^53: tokens can no longer grow exactly'})
  end
  redis.call('SET', K_FENCE, num(token), 'PX', num(lives_ms + FENCE_SLACK_MS))
  return token
end

-- The live lease of `id`: token, ttl, limit, full expiry, owner, whether it
-- is still provisional, and its score in leases (the expiry Redis enforces);
-- nil when `id` holds none.
local function live_lease(id)
  local score = redis.call('ZSCORE', K_LEASES, id)
  if not score or tonumber(score) <= now_ms then
    return nil
  end
  local packed = redis.call('HGET', K_OWNERS, id)
  if not packed then
    return nil
  end
  local token, ttl, limit, full, owner = unpack_lease(packed)
  local provisional = full ~= '0'
  if not provisional then
    full = score
  end
  return {token = tonumber(token), ttl = tonumber(ttl), limit = tonumber(limit),
    expires_at = tonumber(full), owner = owner, provisional = provisional,
    score = tonumber(score)}
end

-- The waiter's instance has answered its client: the lease gets its full expiry.
local function confirm(id, lease)
  if lease.provisional then
    redis.call('ZADD', K_LEASES, 'XX', num(lease.expires_at), id)
    redis.call('HSET', K_OWNERS, id, num(lease.token) .. '|' .. num(lease.ttl) .. '|' ..
      num(lease.limit) .. '|0|' .. lease.owner)
    lease.provisional = false
  end
end

-- Writes a new lease; provisional for a waiter granted by someone else's call.
local function write_lease(id, ttl, limit, owner, provisional)
  local token = next_token(ttl)
  local full = now_ms + ttl
  local expires, marker = full, '0'
  if provisional then
    expires, marker = math.min(full, now_ms + CONFIRM_MS), num(full)
  end
  redis.call('ZADD', K_LEASES, num(expires), id)
  redis.call('HSET', K_OWNERS, id, num(token) .. '|' .. num(ttl) .. '|' .. num(limit) .. '|' ..
    marker .. '|' .. owner, 'limit', num(limit))
  extend_leases(ttl + LINE_TTL_MS)
  return token, full, expires
end

local function remove_waiter(id, packed)
  local _, tag, instance, _, _, _, newest, owner = unpack_waiter(packed)
  redis.call('ZREM', K_QUEUE, id)
  redis.call('HDEL', K_WAITERS, id)
  redis.call('ZREM', K_BYINST, instance .. '|' .. id)
  if newest == '1' and redis.call('HGET', K_WAITERS, 'newest') == id then
    redis.call('HDEL', K_WAITERS, 'newest')
  end
  return tag, owner
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
      local token, _, _, _, owner = unpack_lease(packed)
      NOTICED[#NOTICED + 1] = owner
      NOTICED[#NOTICED + 1] = tonumber(token)
      event('expired', owner, tonumber(token))
    end
  end
end

-- Waiters of instances that stopped keeping them alive leave the line; at
-- most PRUNE_BATCH per call.
local function drop_dead_instances()
  local dead = redis.call('ZRANGEBYSCORE', K_INSTANCES, '-inf', NOW_MS, 'LIMIT', '0', '10')
  local budget = PRUNE_BATCH
  for _, instance in ipairs(dead) do
    local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. instance .. '|',
      '[' .. instance .. '|\255', 'LIMIT', 0, budget)
    for _, member in ipairs(members) do
      local id = string.sub(member, #instance + 2)
      local packed = redis.call('HGET', K_WAITERS, id)
      redis.call('ZREM', K_BYINST, member)
      if packed then
        local _, owner = remove_waiter(id, packed)
        event('left', owner)
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

-- Grants to every waiter that fits, in line order: the waiter at 0-based
-- position i fits when holders + i < its own limit (those ahead of it are
-- holders or still waiters either way). A lock looks at the head only; a
-- semaphore at the first SCAN_BATCH waiters, so one call stays bounded.
-- Each grant is published to the waiter's instance on the name's channel.
-- Returns the live leases afterwards (holders()).
local function serve_line()
  local held = holders()
  local batch = SCAN_BATCH
  if KIND == 'lock' then
    if held > 0 then
      return held
    end
    batch = 1
  end
  local granted = 0
  local head = redis.call('ZRANGE', K_QUEUE, '0', num(batch - 1))
  for i, id in ipairs(head) do
    if held + i - 1 >= 100000 then
      break
    end
    local packed = redis.call('HGET', K_WAITERS, id)
    if packed then
      local _, _, _, ttl, limit = unpack_waiter(packed)
      if held + i - 1 < tonumber(limit) then
        local tag, owner = remove_waiter(id, packed)
        local token, full, expires = write_lease(id, tonumber(ttl), tonumber(limit), owner, true)
        redis.call(NAME_PUBLISH, NAME_CHANNEL, 'g ' .. tag .. ' ' .. num(token) .. ' ' .. num(full) ..
          ' ' .. num(expires - now_ms))
        event('acquired', owner, token)
        granted = granted + 1
      end
    else
      redis.call('ZREM', K_QUEUE, id)
    end
  end
  return held + granted
end

-- Ends the live `lease` of `id` (live_lease()), released or force-released.
local function end_lease(id, lease, what)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_OWNERS, id)
  event(what, lease.owner, lease.token)
  return lease.token, lease.owner
end

-- Appends the live leases that expire first (at most 100) to `reply`: their
-- count n, then token, expires_in_ms and owner ("" none) of each. A
-- provisional grant shows its full expiry.
local function append_leases(reply)
  local live = redis.call('ZRANGEBYSCORE', K_LEASES, AFTER_NOW, '+inf', 'WITHSCORES', 'LIMIT', '0', '100')
  reply[#reply + 1] = #live / 2
  for i = 1, #live, 2 do
    local packed = redis.call('HGET', K_OWNERS, live[i]) or '0|0|0|0|'
    local token, _, _, full, owner = unpack_lease(packed)
    local expires_at = tonumber(live[i + 1])
    if full ~= '0' then
      expires_at = tonumber(full)
    end
    reply[#reply + 1] = tonumber(token)
    reply[#reply + 1] = expires_at - now_ms
    reply[#reply + 1] = owner
  end
  return reply
end

-- The earliest live expiry, in ms from now, and its owner (not looked up,
-- "", when `with_owner` is false); -1 and "" when none.
local function next_expiry(with_owner)
  local first = redis.call('ZRANGEBYSCORE', K_LEASES, AFTER_NOW, '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if #first == 0 then
    return -1, ''
  end
  if with_owner == false then
    return tonumber(first[2]) - now_ms, ''
  end
  local packed = redis.call('HGET', K_OWNERS, first[1])
  local owner = ''
  if packed then
    local _
    _, _, _, _, owner = unpack_lease(packed)
  end
  return tonumber(first[2]) - now_ms, owner
end
