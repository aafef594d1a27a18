-- The lease core shared by every operation of both kinds: the first part of
-- the Redis Functions library that library.rs makes of this file and one
-- function per operation's file, so the line is written once. The library is
-- loaded once; each call of an operation begins with begin(KEYS, ARGV).
--
-- One model for every kind: a lease has a weight, and every acquisition
-- carries the limit it is judged against. A request fits when the weight in
-- use, plus the weight of the waiters ahead of it, plus its own, is at most
-- its limit (fits()). The HTTP layer names the cases:
--   * an exclusive lock: weight FULL of limit FULL (held alone);
--   * a shared lock: weight 1 of limit FULL (any number together, none
--     beside an exclusive one, none overtaking a queued exclusive one);
--   * a semaphore lease: weight `permits` (1 by default) of `limit`.
-- The kinds differ only in their hash tag ({lock:NAME} or {sem:NAME}) and
-- in what the service shows of them.
--
-- KEYS: one, the name's owners hash ("prefix{lock:NAME}:owners"). The
-- others share its hash tag (so one cluster slot, on the node the call
-- runs on) and are named from it when a call needs them (context()): each
-- argument of an FCALL costs Redis about as much as a command, and a free
-- name's acquire and release need only the owners hash.
--   leases    zset: lease id -> the expiry Redis enforces (ms, Redis clock):
--                     the full one, or, for a grant that the waiter's instance has
--                     not confirmed yet, at most CONFIRM_MS away, so that a grant to
--                     a waiter whose instance died frees itself within seconds
--   owners    hash: lease id -> "token|ttl_ms|limit|weight|expires_ms|full_ms|owner"
--                     (expires_ms: its score in leases; full_ms: the full expiry
--                     while provisional, 0 once confirmed) for each lease in
--                     leases; "solo": "expires_ms|token|" followed by the waiter
--                     that acquired it as acquire.lua took it (below), the
--                     name's only lease while nobody waits (the fast path:
--                     then leases and queue are empty); "slow": "1" while
--                     leases or queue may hold anything; "used": the weight of
--                     the leases in leases (expired ones not yet pruned
--                     included); "limit": the limit of the latest acquisition;
--                     "fence": the latest fencing token; "until": when leases
--                     and owners expire (ms); "queued": "count|weight", the
--                     waiters in queue and their weight (sums of the line, so
--                     that admitting a newcomer needs no walk of it: see
--                     "The line's sums" below); "lost": when a keep-alive last
--                     found that the queue had lost waiters (ms), which every
--                     instance's keep-alive watches (keep_alive.lua)
--   queue     zset: waiter -> ticket. A waiter is
--                     "id|tag|instance|ttl_ms|limit|weight|newest|owner", written by
--                     the caller (waiter.rs), read here (tag: a number naming the
--                     waiter on its instance; newest: 1 when it asked newest_wins);
--                     its ticket is max(last ticket + 1, now in microseconds), so
--                     the line is in joining order whichever instance a waiter is on
--   byinst    zset, all scores 0: "instance|waiter", each instance's waiters
--   instances zset: instance id -> alive until (ms); kept fresh by that
--                     instance's keep-alive about every second
--   notes     hash: "newest" -> the queued newest_wins waiter; "s:ID" -> the
--                     owner of the request that superseded waiter ID, for as long as
--                     the line lives (a waiter that missed the message learns it
--                     there, and never rejoins)
-- ARGV, the first two of every operation:
--   ARGV[1] the events channel (prefix + "events"): one JSON change event per
--           change; "" while the caller knows nobody listens there (its
--           instances learn of a new listener at once, and check every second)
--   ARGV[2] the call's context, its fields separated by newlines (which no
--           name holds): the kind ("lock" or "semaphore", for events), the
--           command that publishes on the name's channel ("SPUBLISH" on a
--           cluster: the channel's shard only; "PUBLISH" elsewhere), the
--           caller's instance id, the name's channel
--           (prefix{lock:NAME}:events: messages for the instances that have
--           waiters on the name), and the name (for events)
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
-- The line's sums ("queued" in owners): every call that adds a waiter to
-- the queue or takes one out changes them by what ZADD or ZREM says it
-- changed (count_queued()), so a join, a grant, a leave, a give-up, a
-- supersede and a prune each count once however often they are asked. They
-- are set from the line whenever a call sees all of it (serve_line()), so
-- they are exact again once the line is short. A queue key lost or expired
-- with waiters in it (or a lost owners hash) leaves a queue whose size is
-- not the sums' count: the next keep-alive makes them the queue's again
-- (keep_alive.lua, which also tells every instance's waiters of the loss).
-- Until then they are not trusted: only while their count is the queue's
-- size (newcomer_fits()); a newcomer is refused while it is not.
-- Kept whole for now; with priorities they split into one field per
-- priority, and a newcomer's "ahead" becomes the sum of those at its
-- priority and above.
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
-- Every key gets a TTL: leases and owners (with the fence) outlive the longest
-- lease by at least KEEP_MS, the line's keys LINE_TTL_MS past the last call
-- that touched them (the keep-alives touch them every second while anyone
-- waits, and keep owners, with the line's sums, outliving them). Tokens stay strictly increasing without the fence (docs/design.md):
-- each is max(fence + 1, now in microseconds).
--
-- What the common path costs: a free name's acquire reads the owners hash
-- once and writes the solo field once; its release reads the hash and deletes
-- the field (TIME first in each: 3 commands in a call, 8 in a cycle with the
-- two FCALLs). A hand-off: a waiter's join looks up its own place (its
-- lease comes with the hash), looks at the first lease and the last ticket,
-- and writes its place and the line's sums; a release reads its lease and
-- the fence in one call, grants the head of the line (the sums written with
-- the new lease) and drops its own lease. Pruning
-- what expired or died is checked with one read and done only when there is
-- something to prune.
local ALIVE_MS = 3000        -- an instance not heard of for this long is dead
local CONFIRM_MS = 3000      -- an unconfirmed grant lives at most this long
local LINE_TTL_MS = 10000    -- the line's keys outlive the last touch by this
local KEEP_MS = 60000        -- leases, owners and the fence outlive every lease by this
local PRUNE_BATCH = 100      -- expired leases or dead waiters removed per call, at most
local SCAN_BATCH = 100       -- waiters looked at per call for a grant
local FULL = 1000000000      -- a lock's capacity: an exclusive lease's weight (domain/demand.rs)
local MAX_SAFE = 9007199254740991 -- 2^53 - 1: Lua numbers are exact up to here
-- The line's weight when it is not known (sums rebuilt from a long queue):
-- more than every waiter's weight could take away, and than any limit, so
-- that no newcomer is let past the line until a call sees it whole.
local UNKNOWN_WEIGHT = 1125899906842624 -- 2^50

-- What one call works on, set by begin(): the library's functions are made
-- once, when it is loaded, and Redis runs one call at a time.
local K_LEASES, K_OWNERS, K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES
local KIND, NAME, NAME_CHANNEL, NAME_PUBLISH, EVENTS, ME, CONTEXT
-- Redis's clock at the start of the call; NOW_MS as Redis takes it in
-- arguments (as strings: Redis 7.0 formats a Lua number with "%.17g", which
-- costs more than the command it is an argument of), made when first needed
-- (now_arg()).
local now_us, now_ms, NOW_MS
-- The empty list NOTICED and MESSAGES start as: a call makes its own only
-- when it has something to add (most have nothing).
local EMPTY = {}
-- Expired leases this call removed (owner, token, owner, token, ...), and the
-- messages for the caller's own waiters.
local NOTICED, MESSAGES
-- The owners hash's fields, read once per call by read_state() and kept in
-- step with what the call writes: OWNED (the hash exists), FENCE, UNTIL,
-- SOLO (the solo lease as lease_of() reads it, live or not; nil: none), SLOW,
-- USED (and USED_DIRTY: changed, not yet written), LIMIT, QUEUED_N and
-- QUEUED_W (the line's sums, and QUEUED_DIRTY: changed, not yet written).
local OWNED, FENCE, UNTIL, SOLO, SLOW, USED, USED_DIRTY, LIMIT
local QUEUED_N, QUEUED_W, QUEUED_DIRTY
-- When this call found the queue lost (ms; nil: it did not), to be written.
local LOST
-- The "limit" field as read (a string, or false).
local LIMIT_RAW
-- Which instances keep their waiters alive, as alive() found them in this
-- call (nil until it asks).
local ALIVE
-- What serve_line() found: the line empty (QUEUE_EMPTY); the weight of the
-- waiters it left in line (AHEAD), which is all of them when AHEAD_ALL.
local QUEUE_EMPTY, AHEAD, AHEAD_ALL

-- Every call begins here: its key, its first two arguments, the clock.
local function begin(keys, args)
  K_OWNERS, EVENTS, CONTEXT, K_LEASES = keys[1], args[1], args[2], nil
  local clock = redis.call('TIME')
  now_us = clock[1] * 1000000 + clock[2]
  now_ms = math.floor(now_us / 1000)
  NOW_MS = nil
  NOTICED, MESSAGES = EMPTY, EMPTY
  OWNED, FENCE, UNTIL, SOLO, SLOW, USED, USED_DIRTY = false, 0, 0, nil, false, 0, false
  QUEUED_N, QUEUED_W, QUEUED_DIRTY, LOST = 0, 0, false, nil
  QUEUE_EMPTY, AHEAD, AHEAD_ALL, ALIVE = false, 0, false, nil
end

local function num(n)
  return string.format('%d', n)
end

-- The other keys and the context (ARGV[2]), once a call needs them.
local function context()
  if K_LEASES then
    return
  end
  local stem = string.sub(K_OWNERS, 1, -8)
  K_LEASES, K_QUEUE, K_BYINST = stem .. ':leases', stem .. ':queue', stem .. ':byinst'
  K_INSTANCES, K_NOTES = stem .. ':instances', stem .. ':notes'
  KIND, NAME_PUBLISH, ME, NAME_CHANNEL, NAME =
    string.match(CONTEXT, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
end

local function now_arg()
  if not NOW_MS then
    NOW_MS = num(now_ms)
  end
  return NOW_MS
end

-- The one admission rule: `weight` more fits beside `used` in use and
-- `ahead` queued before it, judged against its own `limit`.
local function fits(used, ahead, weight, limit)
  return used + ahead + weight <= limit
end

local function unpack_waiter(waiter)
  -- id, tag, instance, ttl_ms, limit, weight, newest, owner
  return string.match(waiter, '^([^|]*)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d+)|(%d)|(.*)$')
end

-- A lease from its packed fields, live or not: a table.
local function parse_lease(packed)
  local token, ttl, limit, weight, expires, full, owner =
    string.match(packed, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
  local provisional = full ~= '0'
  local score = tonumber(expires)
  return {token = tonumber(token), ttl = tonumber(ttl), limit = tonumber(limit),
    weight = tonumber(weight), score = score,
    expires_at = provisional and tonumber(full) or score, owner = owner,
    provisional = provisional, live = score > now_ms}
end

-- The live lease of packed fields (HGET owners id): a table, or nil when
-- none or expired.
local function lease_of(packed)
  if not packed then
    return nil
  end
  local lease = parse_lease(packed)
  return lease.live and lease or nil
end

local function pack_lease(token, ttl, limit, weight, expires, full, owner)
  return num(token) .. '|' .. num(ttl) .. '|' .. num(limit) .. '|' .. num(weight) .. '|' ..
    num(expires) .. '|' .. num(full) .. '|' .. owner
end

-- The owners hash's fields read_state() takes, with `id`'s packed lease when
-- `id` is given, in one call.
local function read_fields(id)
  return redis.call('HMGET', K_OWNERS, 'fence', 'until', 'solo', 'slow', 'used', 'limit',
    'queued', id or 'used')
end

-- The solo lease from its field: a table as lease_of() makes, with the
-- waiter's fields besides (id, tag, instance, newest).
local function parse_solo(raw)
  local expires, token, id, tag, instance, ttl, limit, weight, newest, owner = string.match(raw,
    '^(%d+)|(%d+)|([^|]*)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d+)|(%d)|(.*)$')
  local score = tonumber(expires)
  return {id = id, token = tonumber(token), ttl = tonumber(ttl), limit = tonumber(limit),
    weight = tonumber(weight), score = score, expires_at = score, owner = owner,
    provisional = false, live = score > now_ms, tag = tag, instance = instance, newest = newest}
end

-- Takes the fields read_fields() read (see above); returns `id`'s packed
-- lease.
local function take_state(read)
  context()
  OWNED = read[1] ~= false
  FENCE, UNTIL = tonumber(read[1] or '0'), tonumber(read[2] or '0')
  if read[3] then
    SOLO = parse_solo(read[3])
  end
  SLOW = read[4] == '1'
  USED, LIMIT, LIMIT_RAW = tonumber(read[5] or '0'), tonumber(read[6] or '0'), read[6]
  if read[7] then
    local count, weight = string.match(read[7], '^(%d+)|(%d+)$')
    QUEUED_N, QUEUED_W = tonumber(count), tonumber(weight)
  end
  return read[8] or nil
end

-- Reads the owners hash's fields (see above) with `id`'s packed lease when
-- `id` is given (returned), in one call. Every function begins with it.
-- (`id` may name another field of the hash the caller wants: "lost".)
local function read_state(id)
  local packed = take_state(read_fields(id))
  if id then
    return packed
  end
end

-- The live lease of `id`: the solo, or one of leases (`packed`: its field).
local function lease_for(id, packed)
  if SOLO and SOLO.id == id then
    return SOLO.live and SOLO or nil
  end
  return lease_of(packed)
end

local function live_lease(id)
  if SOLO and SOLO.id == id then
    return SOLO.live and SOLO or nil
  end
  return lease_of(redis.call('HGET', K_OWNERS, id))
end

-- The line's sums as the owners hash keeps them.
local function queued_field()
  return num(QUEUED_N) .. '|' .. num(QUEUED_W)
end

-- The line gained (or lost, negative) `count` waiters of `weight` in all.
local function count_queued(count, weight)
  QUEUED_N, QUEUED_W = math.max(0, QUEUED_N + count), math.max(0, QUEUED_W + weight)
  QUEUED_DIRTY = true
end

-- The line's sums are `count` waiters of `weight`, as a call saw it whole.
local function set_queued(count, weight)
  if QUEUED_N ~= count or QUEUED_W ~= weight then
    QUEUED_N, QUEUED_W, QUEUED_DIRTY = count, weight, true
  end
end

-- Writes what the call changed of the owners hash and has not written yet:
-- the weight in use, the line's sums (and their loss), and "slow" cleared
-- once leases and queue are empty. Nothing without "until": the hash is gone
-- (or never was), and a field written now would make it without a TTL.
local function save()
  if UNTIL > 0 and (USED_DIRTY or QUEUED_DIRTY or LOST or (SLOW and USED == 0 and QUEUE_EMPTY)) then
    local fields = {}
    if USED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'used', num(USED)
    end
    if QUEUED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'queued', queued_field()
    end
    if LOST then
      fields[#fields + 1], fields[#fields + 2] = 'lost', num(LOST)
    end
    if SLOW and USED == 0 and QUEUE_EMPTY and redis.call('EXISTS', K_LEASES) == 0 then
      -- Back to the fast path: nothing in leases (checked, not only
      -- counted) and nobody in line.
      fields[#fields + 1], fields[#fields + 2] = 'slow', '0'
      SLOW = false
    end
    if #fields > 0 then
      redis.call('HSET', K_OWNERS, unpack(fields))
    end
    USED_DIRTY, QUEUED_DIRTY, LOST = false, false, nil
  end
end

-- `reply` with what the caller must hear besides it (see above), after
-- save().
local function finish(reply)
  save()
  local n = #reply
  if NOTICED == EMPTY and MESSAGES == EMPTY then
    reply[n + 1], reply[n + 2] = 0, 0
    return reply
  end
  reply[n + 1] = #NOTICED / 2
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
    if MESSAGES == EMPTY then
      MESSAGES = {}
    end
    MESSAGES[#MESSAGES + 1] = message
  else
    redis.call(NAME_PUBLISH, NAME_CHANNEL, message)
  end
end

-- Live leases: the count of those not yet expired.
local function holders()
  if SOLO then
    return SOLO.live and 1 or 0
  end
  return redis.call('ZCOUNT', K_LEASES, '(' .. now_arg(), '+inf')
end

local function waiting()
  return redis.call('ZCARD', K_QUEUE)
end

-- One JSON change event on the events channel, while anyone listens; lease
-- ids never appear. It shows `held` live leases, or as many as there are.
local function event(what, owner, token, held)
  if EVENTS == '' then
    return
  end
  context()
  local json = '{"event":"' .. what .. '","kind":"' .. KIND .. '","name":' .. cjson.encode(NAME)
  if owner and owner ~= '' then
    json = json .. ',"owner":' .. cjson.encode(owner)
  end
  if token then
    json = json .. ',"fencing_token":' .. num(token)
  end
  json = json .. ',"holders":' .. num(held or holders())
  redis.call('PUBLISH', EVENTS, json .. ',"waiting":' .. num(waiting()) .. '}')
end

-- The line's keys live LINE_TTL_MS past the last touch.
local function touch_line()
  for _, key in ipairs({K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES}) do
    redis.call('PEXPIRE', key, num(LINE_TTL_MS))
  end
end

-- The waiter's instance confirms a grant before it answers its client: the
-- lease gets its full expiry now, while it is still live (lease_of() said so
-- in this same call), so Redis holds it until the expires_at the client is
-- told. Its "acquired" event is published now, not at the grant.
local function confirm(id, lease)
  if lease.provisional then
    redis.call('ZADD', K_LEASES, 'XX', num(lease.expires_at), id)
    redis.call('HSET', K_OWNERS, id, pack_lease(lease.token, lease.ttl, lease.limit,
      lease.weight, lease.expires_at, 0, lease.owner))
    lease.provisional, lease.score = false, lease.expires_at
    event('acquired', lease.owner, lease.token)
  end
end

-- The first thing every operation that may grant does after read_state(),
-- before any write: Redis does not roll back a function that fails half-way,
-- so a refusal must come while nothing has changed. It refuses when the
-- tokens this call could take (at most one per waiter it looks at, and one
-- of its own) might pass 2^53, where Lua numbers stop being exact.
local function guard()
  if math.max(FENCE, now_us) + SCAN_BATCH + 1 > MAX_SAFE then
    error({err = 'BATON fencing counter near 2^53: tokens can no longer grow exactly; nothing was changed'})
  end
end

-- Leases and owners (with the fence) outlive `full` (ms) by KEEP_MS at least;
-- when extended, by twice that, so that the next leases need nothing for a
-- while. `fresh`: the leases key may be new, and then needs its TTL.
local function keep_leases(full, fresh)
  if full + KEEP_MS > UNTIL then
    UNTIL = full + 2 * KEEP_MS
    redis.call('HSET', K_OWNERS, 'until', num(UNTIL))
    redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
    if K_LEASES then
      -- (Not named on a fast path: leases is empty there.)
      redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
    end
  elseif fresh then
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  end
  OWNED = true
end

-- The next fencing token. Every caller ran guard() first, so FENCE is known
-- and the token stays exact.
local function next_token()
  local token = FENCE + 1
  if token < now_us then
    token = now_us
  end
  FENCE = token
  return token
end

-- Writes a new lease into leases, taking the next fencing token; provisional
-- for a waiter of another instance. `fresh` says whether the leases key may
-- be new (it had no live lease). Returns the token and the full and the
-- enforced expiry.
local function write_lease(id, ttl, limit, weight, owner, provisional, fresh)
  local token = next_token()
  local full = now_ms + ttl
  local expires, marker = full, 0
  if provisional then
    expires, marker = math.min(full, now_ms + CONFIRM_MS), full
  end
  USED, USED_DIRTY = USED + weight, false
  redis.call('ZADD', K_LEASES, num(expires), id)
  local packed = pack_lease(token, ttl, limit, weight, expires, marker, owner)
  if QUEUED_DIRTY then
    -- (A grant to a waiter: the line's sums changed with it.)
    redis.call('HSET', K_OWNERS, id, packed, 'limit', num(limit), 'fence', num(token),
      'used', num(USED), 'slow', '1', 'queued', queued_field())
    QUEUED_DIRTY = false
  else
    redis.call('HSET', K_OWNERS, id, packed, 'limit', num(limit), 'fence', num(token),
      'used', num(USED), 'slow', '1')
  end
  SLOW = true
  keep_leases(full, fresh)
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
  local solo = num(full) .. '|' .. t .. '|' .. waiter
  if limit ~= LIMIT_RAW then
    redis.call('HSET', K_OWNERS, 'solo', solo, 'fence', t, 'limit', limit)
  else
    redis.call('HSET', K_OWNERS, 'solo', solo, 'fence', t)
  end
  LIMIT_RAW = limit
  keep_leases(full, false)
  return token, full, solo
end

-- A lease that expired before anyone released it: for the audit log and
-- the events.
local function note_expired(owner, token)
  if NOTICED == EMPTY then
    NOTICED = {}
  end
  NOTICED[#NOTICED + 1] = owner
  NOTICED[#NOTICED + 1] = token
  event('expired', owner, token)
end

-- Forgets `id`'s lease in leases, `lease` (parse_lease()), which expired:
-- an expired lease is never released, but its weight no longer counts.
local function forget_lease(id, lease)
  USED, USED_DIRTY = math.max(0, USED - lease.weight), true
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_OWNERS, id)
  note_expired(lease.owner, lease.token)
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
    redis.call('HSET', K_OWNERS, lease.id, pack_lease(lease.token, lease.ttl, lease.limit,
      lease.weight, lease.score, 0, lease.owner), 'used', num(USED), 'slow', '1')
    SLOW = true
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  else
    note_expired(lease.owner, lease.token)
  end
end

-- Takes `waiter` (its fields unpacked; `weight` a number) out of the line,
-- and out of the line's sums if it was in it.
local function remove_waiter(waiter, instance, weight, newest)
  if redis.call('ZREM', K_QUEUE, waiter) == 1 then
    count_queued(-1, -weight)
  end
  redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  if newest == '1' and redis.call('HGET', K_NOTES, 'newest') == waiter then
    redis.call('HDEL', K_NOTES, 'newest')
  end
end

-- Leases past their expiry end; at most PRUNE_BATCH per call. Each lease is
-- pruned once after being granted once, so the work is amortised over the
-- grants, and the batch bounds one call; used_now() counts what is left
-- unpruned as in use, so a lease left for a later call is never mistaken
-- for room.
local function end_expired()
  local gone = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now_arg(), 'LIMIT', '0', num(PRUNE_BATCH))
  for i = 1, #gone do
    local packed = redis.call('HGET', K_OWNERS, gone[i])
    redis.call('ZREM', K_LEASES, gone[i])
    redis.call('HDEL', K_OWNERS, gone[i])
    if packed then
      local lease = parse_lease(packed)
      USED, USED_DIRTY = math.max(0, USED - lease.weight), true
      note_expired(lease.owner, lease.token)
    end
  end
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

-- Whether `instance` keeps its waiters alive (the caller does: it is
-- calling). Asked once per instance in a call (ALIVE): a call that looks at
-- a hundred waiters of a few instances asks Redis a few times, not a
-- hundred; the answer cannot change within the call.
local function alive(instance)
  if instance == ME then
    return true
  end
  if not ALIVE then
    ALIVE = {}
  end
  local known = ALIVE[instance]
  if known == nil then
    local alive_until = redis.call('ZSCORE', K_INSTANCES, instance)
    known = alive_until ~= false and tonumber(alive_until) > now_ms
    ALIVE[instance] = known
  end
  return known
end

-- Waiters of instances that stopped keeping them alive leave the line; at
-- most PRUNE_BATCH per call.
local function drop_dead_instances()
  local first = redis.call('ZRANGE', K_INSTANCES, '0', '0', 'WITHSCORES')
  if #first == 0 or tonumber(first[2]) > now_ms then
    return
  end
  local dead = redis.call('ZRANGEBYSCORE', K_INSTANCES, '-inf', now_arg(), 'LIMIT', '0', '10')
  local budget = PRUNE_BATCH
  for _, instance in ipairs(dead) do
    local members = redis.call('ZRANGEBYLEX', K_BYINST, '[' .. instance .. '|',
      '[' .. instance .. '|\255', 'LIMIT', 0, budget)
    for _, member in ipairs(members) do
      local waiter = string.sub(member, #instance + 2)
      local _, _, _, _, _, weight, newest, owner = unpack_waiter(waiter)
      remove_waiter(waiter, instance, tonumber(weight), newest)
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

-- Grants to every waiter that fits, in line order, `used` being the weight
-- of the live leases: the waiter fits when fits(used, the weight of those
-- still waiting ahead of it, its weight, its limit). A waiter whose
-- instance is dead leaves instead. At most SCAN_BATCH waiters are looked at,
-- so one call stays bounded, and the scan stops once nothing can fit any
-- more (an exclusive lease held or queued). Each grant is told to the
-- waiter's instance: final for the caller's own (it answers its client now),
-- provisional for another's. `kept` says whether the leases key exists for
-- sure (else the first grant may make it, and gives it its TTL). Returns the
-- weight in use afterwards; sets QUEUE_EMPTY, AHEAD and AHEAD_ALL, and the
-- line's sums when it saw the whole line.
local function serve_line(used, kept)
  AHEAD, AHEAD_ALL = 0, false
  if used >= FULL then
    return used
  end
  local position, ahead, looked, granted, batch = 0, 0, 0, 0, 1
  while looked < SCAN_BATCH do
    local head = redis.call('ZRANGE', K_QUEUE, num(position), num(position + batch - 1))
    if #head == 0 then
      QUEUE_EMPTY, AHEAD_ALL = position == 0, true
      set_queued(position, ahead)
      break
    end
    local full = false
    for _, waiter in ipairs(head) do
      looked = looked + 1
      local id, tag, instance, ttl, limit, weight, newest, owner = unpack_waiter(waiter)
      weight = tonumber(weight)
      if not alive(instance) then
        remove_waiter(waiter, instance, weight, newest)
        event('left', owner)
      elseif fits(used, ahead, weight, tonumber(limit)) then
        remove_waiter(waiter, instance, weight, newest)
        -- A second lease: the solo one (if any) moves into leases first.
        unsolo()
        local mine = instance == ME
        local token, expires_at, expires = write_lease(id, tonumber(ttl), tonumber(limit), weight,
          owner, not mine, not kept and granted == 0)
        used, granted = used + weight, granted + 1
        tell(instance, (mine and 'G ' or 'g ') .. tag .. ' ' .. num(token) .. ' ' ..
          num(expires_at) .. ' ' .. num(expires - now_ms))
        if mine then
          -- Another instance's grant is announced when it is confirmed.
          event('acquired', owner, token)
        end
      else
        position, ahead = position + 1, ahead + weight
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

-- Whether a request that has not queued may take `weight` of `limit` now,
-- `used` in use, after serve_line(): it fits beside the leases and every
-- waiter, so it never overtakes one. Exact at any length of the line: what
-- serve_line() did not look at is counted by the line's sums, while they
-- count the whole queue (a ZCARD, only for a line longer than a call looks
-- at); else it is refused, as one that may not fit.
local function newcomer_fits(used, weight, limit)
  if QUEUE_EMPTY then
    return fits(used, 0, weight, limit)
  end
  if AHEAD_ALL or not fits(used, AHEAD, weight, limit) then
    -- All of the line was seen, or what was seen is too much already.
    return AHEAD_ALL and fits(used, AHEAD, weight, limit)
  end
  return QUEUED_N == waiting() and fits(used, QUEUED_W, weight, limit)
end

-- Grants a request that has not queued (or no longer is), `waiter` as
-- acquire.lua takes it with its fields unpacked: the solo lease
-- when the name has no other and nobody waits, else one of leases. Returns
-- the token and the expiry.
local function grant_newcomer(waiter, id, ttl, limit, weight, owner, used)
  local token, full
  if used == 0 and USED == 0 and QUEUE_EMPTY and not SOLO then
    local solo
    token, full, solo = write_solo(waiter, ttl, num(limit))
    SOLO = parse_solo(solo)
  else
    unsolo()
    token, full = write_lease(id, ttl, limit, weight, owner, false, used == 0)
  end
  event('acquired', owner, token)
  return token, full
end

-- Appends the live leases that expire first (at most 100) to `reply`: their
-- count n, then token, expires_in_ms, weight and owner ("" none) of each. A
-- provisional grant shows its full expiry.
local function append_leases(reply)
  if SOLO then
    if SOLO.live then
      reply[#reply + 1] = 1
      reply[#reply + 1] = SOLO.token
      reply[#reply + 1] = SOLO.expires_at - now_ms
      reply[#reply + 1] = SOLO.weight
      reply[#reply + 1] = SOLO.owner
    else
      reply[#reply + 1] = 0
    end
    return reply
  end
  local live = redis.call('ZRANGEBYSCORE', K_LEASES, '(' .. now_arg(), '+inf', 'LIMIT', '0', '100')
  reply[#reply + 1] = #live
  for _, id in ipairs(live) do
    local lease = lease_of(redis.call('HGET', K_OWNERS, id))
    if lease then
      reply[#reply + 1] = lease.token
      reply[#reply + 1] = lease.expires_at - now_ms
      reply[#reply + 1] = lease.weight
      reply[#reply + 1] = lease.owner
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = ''
    end
  end
  return reply
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
