-- The lease core, part 2: the formats of a waiter, a lease and the solo
-- lease, each read and written only here (the keys that hold them: state.lua).
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
--               while provisional, 0 once confirmed, 1 while held for a
--               ticket's pickup (core/tickets.lua); acquired_ms: when it was
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
-- The solo's lease as a lease is packed (pack_lease(): token, ttl, limit,
-- weight, expires, full 0, acquired, waited, priority, then its text) and
-- its owner, read with one match (solo_as_lease()).
local READ_SOLO_AS_LEASE = '^(%d+)|(%d+)|(%d+)|(%d+)|[^|]*|%d+|[^|]*|(%d+)|(%d+)|(%d+)|%d|(%d)|(([^\n]*)\n[^\n]*\n.*)$'
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
  -- full "1": granted to a ticket and held for its pickup (core/tickets.lua).
  local pending = full == '1'
  local provisional = full ~= '0' and not pending
  local score = tonumber(expires)
  local expires_at = provisional and tonumber(full) or score
  ttl = tonumber(ttl)
  return {token = tonumber(token), ttl = ttl, limit = tonumber(limit),
    weight = tonumber(weight), score = score, expires_at = expires_at, owner = owner,
    provisional = provisional, pending = pending, live = score > now_ms,
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

-- The solo field `raw` as the history keeps its lease (what pack_lease()
-- makes of parse_solo()'s table with its own ttl and full 0), its token (a
-- string) and its owner, without a table: the fast release's one read. Nil
-- for a solo of the format before (parse_solo() reads it).
local function solo_as_lease(raw)
  local expires, token, acquired, waited, ttl, limit, weight, priority, text, owner =
    string.match(raw, READ_SOLO_AS_LEASE)
  if not expires then
    return nil
  end
  return table.concat({token, ttl, limit, weight, expires, '0', acquired, waited, priority, text},
    '|'), token, owner
end
