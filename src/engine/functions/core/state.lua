-- The lease core, part 1: a name's state in Redis (its keys and their
-- fields), the arguments every call takes, and the call's own variables.
--
-- The core is the first half of baton's one Redis Functions library:
-- library.rs joins its parts in this order, each using only those before it,
--   state.lua      (this part) keys, fields and arguments; the call's
--                  variables and begin()
--   formats.lua    a waiter, a lease and the solo lease, packed and read
--   persist.lua    the call's state read and saved; the line's sums,
--                  seqs, TTLs and tokens
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
--   owners    hash: lease id -> a lease, packed (pack_lease(), formats.lua), for each
--                     lease in leases; "solo": the name's only lease while nobody
--                     waits, packed with its waiter (pack_solo(), formats.lua; the fast
--                     path, leases.lua: then leases and queue are empty); "slow":
--                     "1" while leases or queue may hold anything; "used": the
--                     weight of the leases in leases (expired ones not yet pruned
--                     included); "limit": the limit of the latest acquisition;
--                     "fence": the latest fencing token; "until": when leases
--                     and owners expire (ms); "queued": "count|weight", the
--                     waiters in queue and their weight (the line's sums, so
--                     that admitting a newcomer needs no walk of it:
--                     admission.lua); "qlimit": at least the largest limit
--                     among them (read only while some wait; absent: not
--                     known, serve_line() looks at its batch only); "ranked": the same sums for each
--                     priority above 0 that has waiters, "p:count:weight"
--                     joined by "," ("" or absent: none; so a line of
--                     priority 0 alone never writes it); "lost": when a keep-alive last found that
--                     the queue had lost waiters (ms), which every instance's
--                     keep-alive watches (keep_alive.lua); "follow": until when
--                     (ms) some instance has a holder's stream open on the name,
--                     set and kept by follow.lua: only then do the calls that
--                     change a lease tell its stream (tell_followers(),
--                     messages.lua)
--   queue     zset: waiter (formats.lua) -> seq; a seq is its join time
--                     in microseconds less priority x PRIORITY_STEP, and
--                     max(last seq of its priority + 1, that), so the
--                     line is in order of priority (higher first), then of
--                     joining, whichever instance a waiter is on (seq())
--   byinst    zset, all scores 0: "instance|waiter", each instance's waiters
--   instances zset: instance id -> alive until (ms); kept fresh by that
--                     instance's keep-alive about every second (a stall of
--                     Redis does not count against it: alive_at(), pruning.lua)
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
--           and until when its list of freezes is fresh,
--           "start_ms|until_ms|fresh_ms" (start and until: the window that
--           holds now, or the next one, as the instance's list has it, both
--           empty for none, so that a name no freeze matches costs nothing
--           more: admission.lua; fresh_ms: Redis's clock when the list was
--           last found to be Redis's, plus 1 s: from then on the call holds
--           the line as a freeze would, since a freeze made after that read
--           may be missing from it; "||0" while the instance itself finds
--           its list stale, freezes/book.rs; a context without this field
--           holds nothing: tools that call a function by hand), the
--           kind ("lock" or "semaphore", for events), the
--           command that publishes on the name's channel ("SPUBLISH" on a
--           cluster: the channel's shard only; "PUBLISH" elsewhere), the
--           caller's instance id, the name's channel
--           (prefix{lock:NAME}:events: messages for the instances that have
--           waiters on the name), the history's terms ("MAX|MS": at most
--           MAX entries, kept MS past the name's last lease; MAX 0: no
--           history, core/history.lua), and the name (for events)
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
local GAP_MS = 1500          -- no call on this node for longer: Redis stalled (stalled_ms())
local GAPS_KEPT_MS = 60000   -- a gap is remembered this long after it ended
local CONFIRM_MS = 3000      -- an unconfirmed grant lives at most this long
local LINE_TTL_MS = 10000    -- the line's keys outlive the last touch by this
local KEEP_MS = 60000        -- leases, owners and the fence outlive every lease by this
local PRUNE_BATCH = 100      -- expired leases or dead waiters removed per call, at most
local SCAN_BATCH = 100       -- waiters looked at per call for a grant
local LOOK_MAX = 1000        -- ... while one further may fit (serve_line())
local TOMBSTONE_SAMPLE = 4   -- fields of a tickets hash looked at per ended ticket (end_ticket())
local FULL = 1000000000      -- a lock's capacity: an exclusive lease's weight (domain/demand.rs)
local MAX_SAFE = 9007199254740991 -- 2^53 - 1: Lua numbers are exact up to here
-- The line's weight when it is not known (sums rebuilt from a long queue):
-- more than every waiter's weight could take away, and than any limit, so
-- that no newcomer is let past the line until a call sees it whole.
local UNKNOWN_WEIGHT = 1125899906842624 -- 2^50
-- What a step of priority takes off a seq (2^49 us, 17 years): more than
-- the join times of any two waiters in one line ever differ, so every
-- seq of a priority sorts before every seq of the one below, and all
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
-- At least the largest limit of a waiter in line (0: unknown, as before it
-- was kept): serve_line() looks past its batch while one may fit; and as
-- the owners hash keeps it ("qlimit").
local QUEUED_L, QUEUED_L_RAW
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
-- Whether serve_line() held a waiter back for a freeze (held_back()): a
-- keep-alive says so, and an instance whose list was stale checks it and
-- serves again.
local HELD_BACK
-- Whether Redis's clock lies inside the window of the freeze the call
-- carries (ARGV[2]'s first field), or past when the list it was chosen
-- from stopped being fresh: nothing is granted then but to a waiter that
-- overrides it (held_back(), admission.lua).
local FROZEN
-- And for a newcomer of a priority above 0: the waiters it left in line by
-- priority (nil: none above 0; else priority -> {count, weight}), and the
-- lowest priority it looked at (10: none).
local AHEAD_RANKED, LOWEST

-- Redis's stalls, as this node's library saw them (kept between calls, in
-- this Lua state only: never a write). Every call notes Redis's clock
-- (LAST_MS); a call that finds no call ran on this node for more than
-- GAP_MS notes the gap (GAPS: {from_ms, to_ms}, the latest last, kept
-- GAPS_KEPT_MS after they ended). While any instance has a waiter on this
-- node, its keep-alives call about every second, so such a gap is a time
-- Redis did not serve (DEBUG SLEEP, a slow fork, a VM freeze, a restart or
-- a failover: the first call after a load notes a gap from 0) or that
-- every instance was cut off from it: no sign that one instance died.
-- Liveness counts Redis's serving time only (alive(), pruning.lua).
local LAST_MS, GAPS = nil, {}

-- Notes the gap since the last call on this node, when there is one.
local function note_gap()
  if LAST_MS and now_ms - LAST_MS <= GAP_MS then
    if now_ms > LAST_MS then
      LAST_MS = now_ms
    end
    return
  end
  local kept = {}
  for _, gap in ipairs(GAPS) do
    if gap[2] > now_ms - GAPS_KEPT_MS then
      kept[#kept + 1] = gap
    end
  end
  kept[#kept + 1] = {LAST_MS or 0, now_ms}
  GAPS, LAST_MS = kept, now_ms
end

-- How much of the time since an instance's keep-alive at `heard_ms`
-- Redis did not serve while that instance was on time (ms): the gap that
-- began less than GAP_MS after it (it keeps alive every second, so it was
-- not late yet), from `heard_ms` on. A gap that began later does not
-- count: the instance was late already, and the node idle or serving
-- nobody else (so a dead instance is not kept alive by calls a few seconds
-- apart). Gaps last more than GAP_MS, so at most one counts, besides the
-- one before the library's first call.
local function stalled_ms(heard_ms)
  local stalled = 0
  for _, gap in ipairs(GAPS) do
    if gap[2] > heard_ms and gap[1] < heard_ms + GAP_MS then
      stalled = stalled + gap[2] - math.max(gap[1], heard_ms)
    end
  end
  return stalled
end

-- Every call begins here: its key, its first two arguments, the clock.
local function begin(keys, args)
  K_OWNERS, EVENTS, CONTEXT, K_LEASES, K_HISTORY = keys[1], args[1], args[2], nil, nil
  local clock = redis.call('TIME')
  now_us = clock[1] * 1000000 + clock[2]
  now_ms = math.floor(now_us / 1000)
  note_gap()
  NOW_MS = nil
  NOTICED, MESSAGES = EMPTY, EMPTY
  OWNED, FENCE, UNTIL, SOLO, SLOW, USED, USED_DIRTY = false, 0, 0, nil, false, 0, false
  QUEUED_N, QUEUED_W, QUEUED_DIRTY, LOST, QUEUED_L, QUEUED_L_RAW = 0, 0, false, nil, 0, 0
  RANKED, RANKED_DIRTY = nil, false
  QUEUE_EMPTY, AHEAD, AHEAD_ALL, ALIVE, HELD_BACK = false, 0, false, nil, false
  -- A list of freezes read more than a second ago (by Redis's clock: the
  -- call was built with a fresh list, then waited, its instance stopped or
  -- its connection stalled) may miss a freeze made since: held as frozen.
  -- This check is here, on Redis's clock and in the call itself, because a
  -- name's function cannot read the freezes' version on Redis Cluster (it
  -- lives in another slot); the instance's own check by age
  -- (freezes/book.rs) covers the time before a call is built.
  local from, till, fresh = string.match(CONTEXT, '^(%d*)|(%d*)|(%d+)\n')
  FROZEN = fresh ~= nil and (now_ms >= tonumber(fresh)
    or (from ~= '' and now_ms >= tonumber(from) and now_ms < tonumber(till)))
  AHEAD_RANKED, LOWEST = nil, 10
  FOLLOWED = false
end

local function num(n)
  return string.format('%d', n)
end

-- The context's fields (ARGV[2]) and the name's other keys, parsed once
-- and kept between calls for the latest names (NAMED_MAX at most, then
-- started afresh): one instance sends the same context for a name on every
-- call. What is kept is what the arguments say, never Redis's state.
local NAMED, NAMED_N, NAMED_MAX = {}, 0, 1000
local function named()
  local n = NAMED[K_OWNERS]
  if n and n.context == CONTEXT then
    return n
  end
  n = {context = CONTEXT}
  local history
  n.kind, n.publish, n.me, n.channel, history, n.name =
    string.match(CONTEXT, '^[^\n]*\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
  local max, ms = string.match(history, '^(%d+)|(%d+)$')
  n.max_arg, n.max, n.ms = max, tonumber(max), tonumber(ms)
  local stem = string.sub(K_OWNERS, 1, -8)
  n.history, n.leases, n.queue = stem .. ':history', stem .. ':leases', stem .. ':queue'
  n.byinst, n.instances, n.notes = stem .. ':byinst', stem .. ':instances', stem .. ':notes'
  if NAMED_N >= NAMED_MAX then
    NAMED, NAMED_N = {}, 0
  end
  NAMED[K_OWNERS], NAMED_N = n, NAMED_N + 1
  return n
end

-- The context (ARGV[2]) and the history's key, once a call needs them
-- (the fast paths may, without naming the other keys: see keep_leases()).
local function terms()
  if K_HISTORY then
    return
  end
  local n = named()
  KIND, NAME_PUBLISH, ME, NAME_CHANNEL, NAME = n.kind, n.publish, n.me, n.channel, n.name
  HISTORY_MAX_ARG, HISTORY_MAX, HISTORY_MS = n.max_arg, n.max, n.ms
  K_HISTORY = n.history
end

-- The other keys and the context, once a call needs them.
local function context()
  if K_LEASES then
    return
  end
  terms()
  local n = named()
  K_LEASES, K_QUEUE, K_BYINST = n.leases, n.queue, n.byinst
  K_INSTANCES, K_NOTES = n.instances, n.notes
end

local function now_arg()
  if not NOW_MS then
    NOW_MS = num(now_ms)
  end
  return NOW_MS
end
