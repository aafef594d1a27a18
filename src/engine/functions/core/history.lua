-- The lease core, part 4: what a name remembers of its leases (its
-- history), written by the calls that end leases, read by history.lua.
--
-- The history key ("prefix{lock:NAME}:history", the name's slot) is a
-- stream of at least the last HISTORY_MAX entries, trimmed approximately
-- (XADD MAXLEN ~: Redis drops whole nodes of the stream, the oldest first,
-- so it may keep up to a node's worth more; an exact trim costs a release
-- about 12 µs of Redis time more, docs/performance.md), one
-- per lease, written once, when the lease ends, by the call that ends it
-- (remember()): its first field "e" is
--   "how|ended_ms|" .. the lease as pack_lease() (formats.lua) packs it
-- (how: "released", "expired", "force-released", "not-collected"; ended_ms: when, Redis
-- clock; an expired lease's is its expiry, not when a call found it), and
-- a force-released lease's entry has a second field "b": the name of the
-- token that force-released it (absent when none: auth off). A lease id
-- is never written there.
--
-- A lease that has not ended is read from where it lives (the solo field
-- or leases, leases.lua): held while live, expired (ended at its expiry)
-- once not, whether or not any call found it expired since. For that,
-- with history on, a name's leases and owners outlive its last lease by
-- HISTORY_MS (keep_ms(), persist.lua), and the history key lives as long
-- (keep_leases() extends it with them; a new stream gets its TTL here).
--
-- What it costs: one XADD per lease (NOMKSTREAM: the stream usually
-- exists; making it adds an XADD and its PEXPIREAT), so an uncontended
-- acquire and release run one command more than without history. A grant
-- that lapsed unconfirmed (provisional, admission.lua) was never told to
-- anyone: it is not remembered.

-- Writes that the lease packed as `packed` (pack_lease()) ended `how` at
-- `ended_ms` (ended by the token named `ended_by`, when it is not nil or
-- ""), while the name keeps a history (terms() known).
local function remember_packed(how, ended_ms, packed, ended_by)
  local entry = how .. '|' .. num(ended_ms) .. '|' .. packed
  local fields = {'e', entry}
  if ended_by and ended_by ~= '' then
    fields[3], fields[4] = 'b', ended_by
  end
  if not redis.call('XADD', K_HISTORY, 'NOMKSTREAM', 'MAXLEN', '~', HISTORY_MAX_ARG, '*',
      unpack(fields)) then
    redis.call('XADD', K_HISTORY, 'MAXLEN', '~', HISTORY_MAX_ARG, '*', unpack(fields))
    -- (As long as the owners hash lives, keep_leases(): a fast path has
    -- not read "until", and then the key lives as the owners hash would.)
    redis.call('PEXPIREAT', K_HISTORY, num(math.max(UNTIL, now_ms + HISTORY_MS + KEEP_MS)))
  end
end

-- Writes that `lease` (a table as parse_lease() or parse_solo() make) ended
-- `how` at `ended_ms` (a force-release: by the token named `ended_by`).
local function remember(lease, how, ended_ms, ended_by)
  terms()
  if HISTORY_MAX == 0 or lease.provisional then
    return
  end
  if lease.pending and how ~= 'force-released' then
    -- Granted to a ticket and never collected (core/tickets.lua).
    how = 'not-collected'
  end
  remember_packed(how, ended_ms, pack_lease(lease, lease.ttl, lease.expires_at, 0), ended_by)
end

-- An entry as history.lua answers it: how, ended_ms (-1 while held),
-- token, weight, limit, acquired_ms, waited_ms, priority, owner, by,
-- override and expires_at_ms of `lease`, and `ended_by` ("" none),
-- appended to `reply`.
local function append_entry(reply, how, ended_ms, lease, ended_by)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = how, ended_ms, lease.token, lease.weight
  reply[n + 5], reply[n + 6], reply[n + 7] = lease.limit, lease.acquired, lease.waited
  reply[n + 8], reply[n + 9], reply[n + 10] = lease.priority, lease.owner, lease.by
  reply[n + 11], reply[n + 12], reply[n + 13] = lease.override, lease.expires_at, ended_by or ''
end
