-- The lease core, part 1: a name's state in Redis (its keys, their fields
-- and formats), and how a call reads and saves it.
--
-- The core is the first half of baton's one Redis Functions library:
-- library.rs joins its parts in this order, each using only those before it,
--   state.lua      (this part) keys, fields and formats; the call's state;
--                  tokens and TTLs
--   history.lua    what a name remembers of its leases once they end
--   messages.lua   what a call tells: instances about their waiters,
--                  watchers about changes, the caller in its reply's tail
--   pruning.lua    leases past their expiry, waiters of dead instances
--   leases.lua     where a name's leases live (its solo field or the leases
--                  zset), behind the accessors every operation uses
--   admission.lua  the one admission rule, serving the line, and what
--                  makes a 201 true
--   views.lua      what a call shows of a name: its leases, the one in the way
-- and then one function per operation's file (acquire.lua, ...), each
-- registered with begin(KEYS, ARGV) as its first line. The library is loaded
-- once: the core's helpers are compiled then, not at each call.
--
-- The kinds (locks and semaphores) share all of it: they differ only in
-- their hash tag ({lock:NAME} or {sem:NAME}), in the weight and limit each
-- acquisition carries (admission.lua) and in what the service shows of them.
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
--   owners    hash: lease id -> a lease, packed (pack_lease(), below), for each
--                     lease in leases; "solo": the name's only lease while nobody
--                     waits, packed with its waiter (pack_solo(), below; the fast
--                     path, leases.lua: then leases and queue are empty); "slow":
--                     "1" while leases or queue may hold anything; "used": the
--                     weight of the leases in leases (expired ones not yet pruned
--                     included); "limit": the limit of the latest acquisition;
--                     "fence": the latest fencing token; "until": when leases
--                     and owners expire (ms); "queued": "count|weight", the
--                     waiters in queue and their weight (the line's sums, so
--                     that admitting a newcomer needs no walk of it:
--                     admission.lua); "ranked": the same sums for each
--                     priority above 0 that has waiters, "p:count:weight"
--                     joined by "," ("" or absent: none; so a line of
--                     priority 0 alone never writes it); "lost": when a keep-alive last found that
--                     the queue had lost waiters (ms), which every instance's
--                     keep-alive watches (keep_alive.lua); "follow": until when
--                     (ms) some instance has a holder's stream open on the name,
--                     set and kept by follow.lua: only then do the calls that
--                     change a lease tell its stream (tell_followers(),
--                     messages.lua)
--   queue     zset: waiter (below) -> ticket; a ticket is its join time
--                     in microseconds less priority x PRIORITY_STEP, and
--                     max(last ticket of its priority + 1, that), so the
--                     line is in order of priority (higher first), then of
--                     joining, whichever instance a waiter is on (ticket())
--   byinst    zset, all scores 0: "instance|waiter", each instance's waiters
--   instances zset: instance id -> alive until (ms); kept fresh by that
--                     instance's keep-alive about every second
--   history   stream: one entry per lease that ended (core/history.lua)
--   notes     hash: "newest" -> the queued newest_wins waiter; "s:ID" -> the
--                     owner of the request that superseded waiter ID, for as long as
--                     the line lives (a waiter that missed the message learns it
--                     there, and never rejoins)
-- ARGV, the first two of every operation (the operation's own follow):
--   ARGV[1] the events channel (prefix + "events"): one JSON change event per
--           change (messages.lua); "" while the caller knows nobody listens
--           there (its instances learn of a new listener at once, and check
--           every second)
--   ARGV[2] the call's context, its fields separated by newlines (which no
--           name holds): the freeze the caller's instance knows for the name
--           ("start_ms|until_ms": the window that holds now, or the next one,
--           as the instance's list of freezes has it; "" for none, so that a
--           name no freeze matches costs nothing more: admission.lua), the
--           kind ("lock" or "semaphore", for events), the
--           command that publishes on the name's channel ("SPUBLISH" on a
--           cluster: the channel's shard only; "PUBLISH" elsewhere), the
--           caller's instance id, the name's channel
--           (prefix{lock:NAME}:events: messages for the instances that have
--           waiters on the name), the history's terms ("MAX|MS": at most
--           MAX entries, kept MS past the name's last lease; MAX 0: no
--           history, core/history.lua), and the name (for events)
--
-- The formats, each read and written only by the functions below. The
-- owner is the last "|"-field, as it may hold "|"; numeric fields come
-- before it, and text fields after it, each after a newline (owner, by and
-- override are printable text: none holds a control character):
--   a waiter    "id|tag|instance|ttl_ms|limit|weight|newest|priority|owner"
--               .. "\n" .. by .. "\n" .. override (tag: a number naming the
--               waiter on its instance; newest: 1 when it asked newest_wins;
--               priority: one digit, 0 to 9; by: the name of the token that
--               made the request, "" none; override: the reason an admin gave
--               to be granted through a freeze, "" none), made by the caller
--               (waiter.rs) and kept whole in queue, byinst and solo:
--               unpack_waiter(), pack_waiter()
--   a lease     "token|ttl_ms|limit|weight|expires_ms|full_ms|acquired_ms|
--               waited_ms|priority|owner" .. "\n" .. by .. "\n" .. override
--               (expires_ms: its score in leases; full_ms: the full expiry
--               while provisional, 0 once confirmed; acquired_ms: when it was
--               granted; waited_ms: how long its request waited for it; the
--               rest its waiter's): parse_lease(), pack_lease()
--   the solo    "expires_ms|token|acquired_ms|waited_ms|" followed by its
--               waiter as the acquire call took it: parse_solo(), pack_solo()
-- A new field is added at one place in each: its pattern's field list and
-- its packer (and waiter.rs for a waiter's). The readers also take the
-- formats of the version before (no priority, acquired_ms, waited_ms, by or
-- override: read as 0 and ""), which a rolling upgrade may leave in a line
-- or a lease for a while.
--
-- Every key gets a TTL: leases and owners (with the fence) outlive the
-- longest lease by at least KEEP_MS (keep_leases(); with history, by the
-- history's MS, and the history key with them), the line's keys
-- LINE_TTL_MS past the last call that touched them (touch_line(); the
-- keep-alives touch them every second while anyone waits, and keep owners,
-- with the line's sums, outliving them). Tokens stay strictly increasing
-- without the fence (docs/design.md): each is max(fence + 1, now in
-- microseconds) (next_token()).
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
-- What a step of priority takes off a ticket (2^49 us, 17 years): more than
-- the join times of any two waiters in one line ever differ, so every
-- ticket of a priority sorts before every ticket of the one below, and all
-- stay exact (join times are about 2^51 us; 9 steps are less than 2^53).
local PRIORITY_STEP = 562949953421312

-- What one call works on, set by begin(): the library's functions are made
-- once, when it is loaded, and Redis runs one call at a time.
local K_LEASES, K_OWNERS, K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES
local KIND, NAME, NAME_CHANNEL, NAME_PUBLISH, EVENTS, ME, CONTEXT
-- The history's key and terms (terms()): HISTORY_MAX entries at most (0: no
-- history; HISTORY_MAX_ARG as a string), kept HISTORY_MS past the name's
-- last lease.
local K_HISTORY, HISTORY_MAX, HISTORY_MAX_ARG, HISTORY_MS
-- Redis's clock at the start of the call; NOW_MS as Redis takes it in
-- arguments (as strings: Redis 7.0 formats a Lua number with "%.17g", which
-- costs more than the command it is an argument of), made when first needed
-- (now_arg()).
local now_us, now_ms, NOW_MS
-- The empty list NOTICED and MESSAGES start as: a call makes its own only
-- when it has something to add (most have nothing).
local EMPTY = {}
-- Expired leases this call removed (owner, token, owner, token, ...), and the
-- messages for the caller's own waiters (messages.lua).
local NOTICED, MESSAGES
-- The owners hash's fields, read once per call by read_state() and kept in
-- step with what the call writes: OWNED (the hash exists), FENCE, UNTIL,
-- SOLO (the solo lease as parse_solo() reads it, live or not; nil: none), SLOW,
-- USED (and USED_DIRTY: changed, not yet written), LIMIT, QUEUED_N and
-- QUEUED_W (the line's sums, and QUEUED_DIRTY: changed, not yet written).
local OWNED, FENCE, UNTIL, SOLO, SLOW, USED, USED_DIRTY, LIMIT
local QUEUED_N, QUEUED_W, QUEUED_DIRTY
-- The line's sums for each priority above 0 ("ranked"): nil when none, else
-- priority -> {count, weight}; RANKED_DIRTY: changed, not yet written.
local RANKED, RANKED_DIRTY
-- Whether someone follows a lease of the name ("follow" in the future).
local FOLLOWED
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
-- Whether Redis's clock lies inside the window of the freeze the call
-- carries (ARGV[2]'s first field): nothing is granted then but to a waiter
-- that overrides it (held_back(), admission.lua).
local FROZEN
-- And for a newcomer of a priority above 0: the waiters it left in line by
-- priority (nil: none above 0; else priority -> {count, weight}), and the
-- lowest priority it looked at (10: none).
local AHEAD_RANKED, LOWEST

-- Every call begins here: its key, its first two arguments, the clock.
local function begin(keys, args)
  K_OWNERS, EVENTS, CONTEXT, K_LEASES, K_HISTORY = keys[1], args[1], args[2], nil, nil
  local clock = redis.call('TIME')
  now_us = clock[1] * 1000000 + clock[2]
  now_ms = math.floor(now_us / 1000)
  NOW_MS = nil
  NOTICED, MESSAGES = EMPTY, EMPTY
  OWNED, FENCE, UNTIL, SOLO, SLOW, USED, USED_DIRTY = false, 0, 0, nil, false, 0, false
  QUEUED_N, QUEUED_W, QUEUED_DIRTY, LOST = 0, 0, false, nil
  RANKED, RANKED_DIRTY = nil, false
  QUEUE_EMPTY, AHEAD, AHEAD_ALL, ALIVE = false, 0, false, nil
  -- (Anchored: a call without a freeze fails at the first character.)
  local from, till = string.match(CONTEXT, '^(%d+)|(%d+)\n')
  FROZEN = from ~= nil and now_ms >= tonumber(from) and now_ms < tonumber(till)
  AHEAD_RANKED, LOWEST = nil, 10
  FOLLOWED = false
end

local function num(n)
  return string.format('%d', n)
end

-- The context (ARGV[2]) and the history's key, once a call needs them
-- (the fast paths may, without naming the other keys: see keep_leases()).
local function terms()
  if K_HISTORY then
    return
  end
  local history
  KIND, NAME_PUBLISH, ME, NAME_CHANNEL, history, NAME =
    string.match(CONTEXT, '^[^\n]*\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
  local max, ms = string.match(history, '^(%d+)|(%d+)$')
  HISTORY_MAX_ARG, HISTORY_MAX, HISTORY_MS = max, tonumber(max), tonumber(ms)
  K_HISTORY = string.sub(K_OWNERS, 1, -8) .. ':history'
end

-- The other keys and the context, once a call needs them.
local function context()
  if K_LEASES then
    return
  end
  terms()
  local stem = string.sub(K_OWNERS, 1, -8)
  K_LEASES, K_QUEUE, K_BYINST = stem .. ':leases', stem .. ':queue', stem .. ':byinst'
  K_INSTANCES, K_NOTES = stem .. ':instances', stem .. ':notes'
end

local function now_arg()
  if not NOW_MS then
    NOW_MS = num(now_ms)
  end
  return NOW_MS
end

-- The patterns that read the formats above: a waiter, a solo and a lease
-- whole (unpack_waiter(), parse_solo(), parse_lease()), and the leading
-- fields that the fast paths (acquire.lua, release.lua) read before the
-- state, so that they read no more than they need. Each reads fields from
-- the start: a field appended to a format changes only its whole pattern
-- (library.rs checks that every one reads its format). A solo is its own
-- fields, then its waiter (READ_SOLO leaves that to unpack_waiter()); the
-- text after the owner's "|" is split by READ_TEXT.
local READ_WAITER = '^([^|]*)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d+)|(%d)|(%d)|(.*)$'
local READ_SOLO = '^(%d+)|(%d+)|(%d+)|(%d+)|(.*)$'
local READ_LEASE = '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d)|(.*)$'
local READ_TEXT = '^([^\n]*)\n([^\n]*)\n(.*)$'
-- A waiter's id and newest; its ttl_ms and limit.
local READ_WAITER_ID_NEWEST = '^([^|]*)|%d+|[^|]*|%d+|%d+|%d+|(%d)|'
local READ_WAITER_TERMS = '^[^|]*|%d+|[^|]*|(%d+)|(%d+)|'
-- The solo's expiry; its expiry, token and lease id.
local READ_SOLO_EXPIRES = '^(%d+)|'
local READ_SOLO_HEAD = '^(%d+)|(%d+)|%d+|%d+|([^|]*)|'
-- The formats of the version before (no priority, acquired_ms, waited_ms,
-- by or override), tried only when the current pattern does not match.
local READ_WAITER_V1 = '^([^|]*)|(%d+)|([^|]*)|(%d+)|(%d+)|(%d+)|(%d)|(.*)$'
local READ_SOLO_V1 = '^(%d+)|(%d+)|(.*)$'
local READ_LEASE_V1 = '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$'

-- A waiter's fields, as strings: id, tag, instance, ttl_ms, limit, weight,
-- newest ("1" or "0"), priority ("0" to "9"), owner, by and override (""
-- none).
local function unpack_waiter(waiter)
  local id, tag, instance, ttl, limit, weight, newest, priority, text =
    string.match(waiter, READ_WAITER)
  if not id then
    id, tag, instance, ttl, limit, weight, newest, text = string.match(waiter, READ_WAITER_V1)
    priority = '0'
  end
  local owner, by, override = string.match(text, READ_TEXT)
  if not owner then
    return id, tag, instance, ttl, limit, weight, newest, priority, text, '', ''
  end
  return id, tag, instance, ttl, limit, weight, newest, priority, owner, by, override
end

-- A waiter as a table: its fields (unpack_waiter()), with ttl, limit,
-- weight and priority as numbers.
local function waiter_of(waiter)
  local id, tag, instance, ttl, limit, weight, newest, priority, owner, by, override =
    unpack_waiter(waiter)
  return {id = id, tag = tag, instance = instance, ttl = tonumber(ttl), limit = tonumber(limit),
    weight = tonumber(weight), newest = newest, priority = tonumber(priority), owner = owner,
    by = by, override = override}
end

-- The waiter `w` (a table as waiter_of() makes) with `ttl`: the inverse of
-- waiter_of().
local function pack_waiter(w, ttl)
  return table.concat({w.id, w.tag, w.instance, num(ttl), num(w.limit), num(w.weight), w.newest,
    num(w.priority), w.owner}, '|') .. '\n' .. w.by .. '\n' .. w.override
end

-- A lease from its packed fields, live or not: a table (acquired: when it
-- was granted, ms; waited: how long its request waited, ms).
local function parse_lease(packed)
  local token, ttl, limit, weight, expires, full, acquired, waited, priority, text =
    string.match(packed, READ_LEASE)
  if not token then
    token, ttl, limit, weight, expires, full, text = string.match(packed, READ_LEASE_V1)
    waited, priority = '0', '0'
  end
  local owner, by, override = string.match(text, READ_TEXT)
  if not owner then
    owner, by, override = text, '', ''
  end
  local provisional = full ~= '0'
  local score = tonumber(expires)
  local expires_at = provisional and tonumber(full) or score
  ttl = tonumber(ttl)
  return {token = tonumber(token), ttl = ttl, limit = tonumber(limit),
    weight = tonumber(weight), score = score, expires_at = expires_at, owner = owner,
    provisional = provisional, live = score > now_ms,
    -- (An older lease: granted one ttl before its expiry, at the latest.)
    acquired = acquired and tonumber(acquired) or expires_at - ttl,
    waited = tonumber(waited), priority = tonumber(priority), by = by, override = override}
end

-- The packed fields of `lease` (a table as parse_lease() makes) with `ttl`,
-- `expires` its score in leases and `full` its full expiry while
-- provisional (else 0).
local function pack_lease(lease, ttl, expires, full)
  return table.concat({num(lease.token), num(ttl), num(lease.limit), num(lease.weight),
    num(expires), num(full), num(lease.acquired), num(lease.waited), num(lease.priority),
    lease.owner}, '|') .. '\n' .. lease.by .. '\n' .. lease.override
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

-- The solo lease from its field: a table as parse_lease() makes, with the
-- waiter's fields besides (waiter_of(): id, tag, instance, newest).
local function parse_solo(raw)
  local expires, token, acquired, waited, waiter = string.match(raw, READ_SOLO)
  if not expires then
    expires, token, waiter = string.match(raw, READ_SOLO_V1)
  end
  local solo = waiter_of(waiter)
  local score = tonumber(expires)
  solo.token, solo.score, solo.expires_at = tonumber(token), score, score
  solo.provisional, solo.live = false, score > now_ms
  solo.acquired = acquired and tonumber(acquired) or score - solo.ttl
  solo.waited = tonumber(waited or '0')
  return solo
end

-- The solo field of a lease that expires at `expires` (ms), with `token`
-- (a string), granted at `acquired` (ms) after a wait of `waited` (ms), and
-- the waiter that acquired it: the inverse of parse_solo().
local function pack_solo(expires, token, acquired, waited, waiter)
  return num(expires) .. '|' .. token .. '|' .. num(acquired) .. '|' .. num(waited) .. '|' ..
    waiter
end

-- The owners hash's fields read_state() takes, with `id`'s packed lease when
-- `id` is given, in one call.
local function read_fields(id)
  return redis.call('HMGET', K_OWNERS, 'fence', 'until', 'solo', 'slow', 'used', 'limit',
    'queued', 'ranked', id or 'used', 'follow')
end

-- Whether the fields read_fields() read say that someone follows a lease
-- of the name (a holder's stream is open on it).
local function followed(read)
  return read[10] ~= false and tonumber(read[10]) > now_ms
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
  FOLLOWED = followed(read)
  USED, LIMIT, LIMIT_RAW = tonumber(read[5] or '0'), tonumber(read[6] or '0'), read[6]
  if read[7] then
    local count, weight = string.match(read[7], '^(%d+)|(%d+)$')
    QUEUED_N, QUEUED_W = tonumber(count), tonumber(weight)
  end
  if read[8] and read[8] ~= '' then
    RANKED = {}
    for p, count, weight in string.gmatch(read[8], '(%d):(%d+):(%d+)') do
      RANKED[tonumber(p)] = {tonumber(count), tonumber(weight)}
    end
  end
  return read[9] or nil
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

-- The line's sums as the owners hash keeps them.
local function queued_field()
  return num(QUEUED_N) .. '|' .. num(QUEUED_W)
end

-- The "ranked" field (see above) of RANKED.
local function ranked_field()
  local parts = {}
  if RANKED then
    for p = 1, 9 do
      local r = RANKED[p]
      if r and (r[1] > 0 or r[2] > 0) then
        parts[#parts + 1] = num(p) .. ':' .. num(r[1]) .. ':' .. num(r[2])
      end
    end
  end
  return table.concat(parts, ',')
end

-- The line gained (or lost, negative) `count` waiters of `weight` in all,
-- of `priority` (a number).
local function count_queued(count, weight, priority)
  QUEUED_N, QUEUED_W = math.max(0, QUEUED_N + count), math.max(0, QUEUED_W + weight)
  QUEUED_DIRTY = true
  if priority > 0 then
    RANKED = RANKED or {}
    local r = RANKED[priority] or {0, 0}
    r[1], r[2] = math.max(0, r[1] + count), math.max(0, r[2] + weight)
    RANKED[priority], RANKED_DIRTY = r, true
  end
end

-- The line's sums are `count` waiters of `weight`, and `ranked` (priority
-- -> {count, weight}, nil: none above 0) for the priorities above 0, as a
-- call saw it whole.
local function set_queued(count, weight, ranked)
  if QUEUED_N ~= count or QUEUED_W ~= weight then
    QUEUED_N, QUEUED_W, QUEUED_DIRTY = count, weight, true
  end
  if ranked or RANKED then
    local before = ranked_field()
    RANKED = ranked
    RANKED_DIRTY = RANKED_DIRTY or ranked_field() ~= before
  end
end

-- The weight queued at `priority` and above, as the line's sums count it.
local function queued_from(priority)
  if priority == 0 then
    return QUEUED_W
  end
  local weight = 0
  if RANKED then
    for p = priority, 9 do
      weight = weight + (RANKED[p] and RANKED[p][2] or 0)
    end
  end
  return weight
end

-- Takes `waiter` (its fields unpacked; `weight` and `priority` numbers) out
-- of the line, and out of the line's sums if it was in it.
local function remove_waiter(waiter, instance, weight, newest, priority)
  if redis.call('ZREM', K_QUEUE, waiter) == 1 then
    count_queued(-1, -weight, priority)
  end
  redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  if newest == '1' and redis.call('HGET', K_NOTES, 'newest') == waiter then
    redis.call('HDEL', K_NOTES, 'newest')
  end
end

-- Writes what the call changed of the owners hash and has not written yet:
-- the weight in use, the line's sums (and their loss), and "slow" cleared
-- once leases and queue are empty. Nothing without "until": the hash is gone
-- (or never was), and a field written now would make it without a TTL.
local function save()
  if UNTIL > 0 and (USED_DIRTY or QUEUED_DIRTY or RANKED_DIRTY or LOST or
      (SLOW and USED == 0 and QUEUE_EMPTY)) then
    local fields = {}
    if USED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'used', num(USED)
    end
    if QUEUED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'queued', queued_field()
    end
    if RANKED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'ranked', ranked_field()
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
    USED_DIRTY, QUEUED_DIRTY, RANKED_DIRTY, LOST = false, false, false, nil
  end
end

-- Live leases: the count of those not yet expired, the solo or in leases.
-- (The one count of leases every event shows, so it comes before them:
-- leases.lua has the rest of what looks at either.)
local function holders()
  if SOLO then
    return SOLO.live and 1 or 0
  end
  return redis.call('ZCOUNT', K_LEASES, '(' .. now_arg(), '+inf')
end

-- Requests in line.
local function waiting()
  return redis.call('ZCARD', K_QUEUE)
end

-- The ticket (see above) of a waiter of `priority` (a number) joining the
-- line now: after the last of its priority, before every lower one. Also
-- whether it found none at its priority or above (the line may be new).
local function ticket(priority)
  local t = now_us - priority * PRIORITY_STEP
  local last = redis.call('ZRANGE', K_QUEUE, '(' .. num(t + PRIORITY_STEP / 2), '-inf',
    'BYSCORE', 'REV', 'LIMIT', '0', '1', 'WITHSCORES')
  if #last > 0 and tonumber(last[2]) >= t then
    t = tonumber(last[2]) + 1
  end
  return t, #last == 0
end

-- When a waiter of `priority` (a number) with `ticket` (its score in queue)
-- joined the line (ms).
local function joined_ms(ticket, priority)
  return math.floor((ticket + priority * PRIORITY_STEP) / 1000)
end

-- The line's keys live LINE_TTL_MS past the last touch.
local function touch_line()
  for _, key in ipairs({K_QUEUE, K_BYINST, K_INSTANCES, K_NOTES}) do
    redis.call('PEXPIRE', key, num(LINE_TTL_MS))
  end
end

-- How long a name's leases and owners outlive its last lease (ms): KEEP_MS,
-- or with history as long as it is kept (an expired lease reads as expired
-- from its own fields until then: core/history.lua).
local function keep_ms()
  terms()
  return HISTORY_MAX > 0 and HISTORY_MS or KEEP_MS
end

-- Leases and owners (with the fence) outlive `full` (ms) by keep_ms() at
-- least; when extended, by KEEP_MS more, so that the next leases need
-- nothing for a while; the history key with them. `fresh`: the leases key
-- may be new, and then needs its TTL.
local function keep_leases(full, fresh)
  local keep = keep_ms()
  if full + keep > UNTIL then
    UNTIL = full + keep + KEEP_MS
    redis.call('HSET', K_OWNERS, 'until', num(UNTIL))
    redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
    if K_LEASES then
      -- (Not named on a fast path: leases is empty there.)
      redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
    end
    if HISTORY_MAX > 0 then
      redis.call('PEXPIREAT', K_HISTORY, num(UNTIL))
    end
  elseif fresh then
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  end
  OWNED = true
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
