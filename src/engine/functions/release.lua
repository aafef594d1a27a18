-- End a lease, or leave the line, and serve whoever moves up
-- (core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  lease id (the waiter's id while it waits)
-- ARGV[4]  mode:
--            "release"  the holder gives the lease back (DELETE)
--            "leave"    a waiter whose client is gone (an abandoned
--                       acquisition): leaves the line and releases its lease,
--                       whichever of the two it has (never both:
--                       core/admission.lua; but both go if it had); a lease
--                       nobody was told of leaves no history entry
--            "give-up"  a waiter whose wait ended: takes a lease granted
--                       meanwhile, or one the name has room for now (the line
--                       is served first, so a waiter at the head of a free
--                       name is never refused); else leaves the line
-- ARGV[5]  the waiter, as the line keeps it (core/formats.lua), for "leave" and
--          "give-up"; "" for "release"
--
-- Replies, each ended by finish() (core/messages.lua)
--   {3, fencing_token, expires_at_ms}  "give-up" got a lease: held (confirmed)
--                                      until expires_at_ms
--   {code, holders, used, waiting, expires_in_ms, owner, released_token, released_owner}, code:
--       1  released a live lease
--       2  left the line
--       0  nothing: no live lease, not in line
--   with the name's state afterwards ("give-up" only; 0, 0, 0, -1 and ""
--   for the others): live leases and their weight, queued requests, and the
--   time left and owner of the lease in its way (in_the_way(),
--   core/views.lua; -1 and "" when none);
--   then the fencing token and owner of the lease released (0 and "" unless
--   code 1), for the audit line
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- A lease released tells its holder's stream "l TOKEN released", while
-- someone follows a lease of the name (core/messages.lua).
local id, mode, waiter = ARGV[3], ARGV[4], ARGV[5]
-- The lease, the fence and the weight in use in one read: a release usually
-- grants next.
local read = read_fields(id)
local solo = read[3]
local held
if solo then
  local expires, token, solo_id = string.match(solo, READ_SOLO_HEAD)
  if solo_id == id and mode == 'release' and tonumber(expires) > now_ms then
    -- The fastest path: the holder releases the name's only live lease,
    -- nobody waits (core/leases.lua). The same as the fast path below,
    -- without reading the lease into a table: its history entry is its
    -- field rewritten by one match.
    local lease, _, owner = solo_as_lease(solo)
    if lease then
      redis.call('HDEL', K_OWNERS, 'solo')
      FOLLOWED = followed(read)
      tell_followers('l ' .. token .. ' released')
      terms()
      if HISTORY_MAX > 0 then
        remember_packed('released', now_ms, lease)
      end
      token = tonumber(token)
      event('released', owner, token, 0)
      return finish({1, 0, 0, 0, -1, '', token, owner})
    end
  end
  if solo_id == id or (not solo_id and parse_solo(solo).id == id) then
    -- (No solo_id: a solo of the format before, read whole.)
    held = parse_solo(solo)
  end
end
if held then
  -- The fast path: the name's only lease, and nobody waits (core/leases.lua).
  if held.live and mode == 'give-up' then
    return finish({3, held.token, held.score})
  end
  redis.call('HDEL', K_OWNERS, 'solo')
  if held.live then
    FOLLOWED = followed(read)
    tell_followers('l ' .. num(held.token) .. ' released')
    if mode ~= 'leave' then
      -- (An abandoned acquisition's lease was never told to anyone: it
      -- is not history.)
      remember(held, 'released', now_ms)
    end
    event('released', held.owner, held.token, 0)
    return finish({1, 0, 0, 0, -1, '', held.token, held.owner})
  end
  -- An expired lease is never released, but forgotten.
  note_expired(held)
  return finish({0, 0, 0, 0, -1, '', 0, ''})
end
local packed = take_state(read)
guard()

-- The weight of the live leases now, and the first to end.
local function used_now_first()
  local first = first_lease()
  return used_now(first), first
end

local code = 0
local released_token, released_owner = 0, ''
if waiter ~= '' then
  local w = waiter_of(waiter)
  local instance, weight, newest, owner, priority =
    w.instance, w.weight, w.newest, w.owner, w.priority
  -- A superseded waiter (its note says by whom) never takes room.
  local superseded = newest == '1' and redis.call('HDEL', K_NOTES, 's:' .. id) == 1
  local queued = redis.call('ZSCORE', K_QUEUE, waiter)
  if mode == 'give-up' then
    -- Served first: a waiter that fits now is granted rather than refused.
    local used, first = used_now_first()
    serve_line(used, first ~= nil)
    -- Its lease as it is now: the line may have granted it one, and pruned
    -- an expired one.
    packed = redis.call('HGET', K_OWNERS, id)
    local lease = lease_for(id, packed)
    if lease then
      -- (A grant took it out of the line: core/admission.lua.)
      confirm(id, lease)
      return finish({3, lease.token, lease.expires_at})
    end
    if packed then
      -- Expired: forgotten, so that a new lease is not counted twice.
      forget_lease(id, parse_lease(packed), true)
      packed = nil
    end
    if not queued and not superseded then
      -- Out of line (pruned, or its keys lost): it takes room the name has
      -- now, as a request that never queued would. Written with its full
      -- expiry; the caller answers it from this reply.
      used = used_now_first()
      if not held_back(w.override) and newcomer_fits(used, weight, w.limit, priority) then
        redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
        local token, full = grant_newcomer(waiter, w, used)
        return finish({3, token, full})
      end
    end
  end
  if queued then
    remove_waiter(waiter, instance, weight, newest, priority)
    event('left', owner)
    code = 2
  else
    redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  end
end
-- The lease of `id`, if any ("give-up" has none here: a live one was taken
-- above, an expired one forgotten). "leave" releases it even when the
-- waiter was in line too.
local lease = lease_of(packed)
if lease then
  -- Its weight is free before the line is served; the lease itself is
  -- removed after, so the leases key stays, with its TTL.
  USED, USED_DIRTY = math.max(0, USED - lease.weight), true
  local used = USED
  if used > 0 then
    -- Others hold leases too: the expired ones among them are pruned
    -- first, so that they count no more (this lease is live: it stays).
    used = used_now(first_lease())
  end
  if EVENTS ~= '' then
    event('released', lease.owner, lease.token, holders() - 1)
  end
  serve_line(used, true)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_OWNERS, id)
  if mode ~= 'leave' then
    remember(lease, 'released', now_ms)
  end
  released_token, released_owner = lease.token, lease.owner
  tell_followers('l ' .. num(lease.token) .. ' released')
  code = 1
elseif packed then
  forget_lease(id, parse_lease(packed), true)
end
if code ~= 1 then
  -- Whoever moved up (or waited behind an expired lease) may fit now.
  local used, first = used_now_first()
  serve_line(used, first ~= nil)
end
if mode ~= 'give-up' then
  -- The name's state matters only to a waiter that gives up (its 409).
  return finish({code, 0, 0, 0, -1, '', released_token, released_owner})
end
local first = first_lease()
local expires_in, owner = in_the_way(first, true)
return finish({code, holders(), used_now(first), waiting(), expires_in, owner, released_token,
  released_owner})
