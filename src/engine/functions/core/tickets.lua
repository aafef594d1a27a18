-- The lease core, part 6: tickets, a place in line that outlives the
-- request that took it (ticket.lua has the operations; docs/design.md).
--
-- A ticket is a waiter whose place is kept without any instance keeping it
-- alive: its entry in queue is a waiter (formats.lua) whose instance is
-- "~EXPIRES~PICKUP" (EXPIRES: when its place ends, ms, Redis clock;
-- PICKUP: how long a grant is held for it, ms) and whose tag is 0. It is
-- alive until EXPIRES (alive(), pruning.lua), so it costs no keep-alive:
-- the first call that looks at it after that takes it out of the line. Its
-- id is the ticket, and the id of the lease it is granted.
--
-- A request that keeps its place (keep_place_ms) has a record in the
-- name's tickets hash ("prefix{lock:NAME}:tickets", its slot) for as long
-- as it is in line or its grant waits for pickup:
--   ticket -> "keep_ms|pickup_ms|expires_ms|" .. its entry in queue as it
--             is now (a ticket's, or an active waiter's while a request
--             waits on it on some instance)
--   ticket .. ":n" -> "notified_ms|url", with "\n" .. error after it while
--             its delivery fails: a ticket that asked a turn notice
--             (notify; notified_ms 0: not delivered yet)
--   ticket .. ":q" -> the seq (its score in queue) an active waiter with a
--             record had when another instance's call granted it (kept_hold()):
--             the place it goes back to should that grant lapse unconfirmed
--             (kept_back(), pruning.lua)
--   ticket -> "x" .. until_ms, in place of the record, once the ticket
--             ended (not collected in time, left, its place expired:
--             end_ticket()): a tombstone, until the ticket's place would
--             have expired (and at least its keep_place from the end). A
--             waiter that kept its place on an instance paused meanwhile
--             asks again when it resumes; finding this, it is answered
--             that its ticket is gone, and it neither rejoins the line
--             (acquire.lua's rejoin, ticket.lua's park) nor is granted
--             anything. Read only on those paths; parse_record() reads it
--             as no record, so every other path sees the ticket gone.
-- The hash's TTL is the latest of its tickets' deadlines (never shortened).
--
-- Granted while nobody waits on it (serve_line(), admission.lua), a ticket's
-- lease is written with its expiry at the grant + PICKUP and marked pending
-- (formats.lua): Redis holds it for the ticket until then; collected, it
-- gets its full ttl from the collect (ticket.lua); not collected, it
-- expires and its history entry says "not-collected" (history.lua). The
-- pending lease weighs what the ticket asked, so nobody is granted past it.
--
-- A ticket that asked a turn notice, granted while nobody waits on it, has
-- its notice due (notice_due()): the name's notices zset
-- ("prefix{lock:NAME}:notices", its slot) gets ticket -> when an instance
-- may try it next (ms, Redis clock), and the call tells its caller in its
-- reply ("d 1", messages.lua), which delivers it at once; an instance
-- claims a notice by moving that time past its try (notice.lua), so a
-- notice claimed by an instance that died is tried again by another.
--
-- An active waiter with a record whose instance dies is not dropped: it
-- becomes a ticket again in the same place (orphan_kept()). Granted while
-- it waits on another instance than the caller's, its grant is held
-- unconfirmed as long as a ticket's pickup (kept_hold()), not CONFIRM_MS:
-- its instance may be paused, and a grant that lapsed would send it to the
-- back of the line when it resumes. Such a grant is held no longer than
-- its lease's ttl, though, nor past CONFIRM_MS when the pickup is shorter:
-- should it lapse unconfirmed all the same (its instance paused for longer),
-- the waiter goes back to the place it was granted from (kept_back(),
-- pruning.lua), a ticket there once its instance is presumed dead, so that
-- nobody behind it is served first meanwhile; the instance that resumes
-- finds it there.

-- The tickets hash of the call's name.
local function tickets_key()
  return string.sub(K_OWNERS, 1, -8) .. ':tickets'
end

-- Whether a ticket's place (its instance field, "~EXPIRES~PICKUP") is live.
local function ticket_alive(instance)
  local expires = string.match(instance, '^~(%d+)')
  return expires ~= nil and tonumber(expires) > now_ms
end

-- How long a grant is held for the waiter of `instance` when it is a
-- ticket (ms); nil for any other waiter.
local function ticket_pickup(instance)
  if string.byte(instance, 1) ~= 126 then
    return nil
  end
  return tonumber(string.match(instance, '^~%d+~(%d+)$') or '0')
end

-- The ticket form of waiter `w` (waiter_of()), its place kept until
-- `expires` with grants held `pickup` ms.
local function ticket_form(w, expires, pickup)
  local active_tag, active_instance = w.tag, w.instance
  w.tag, w.instance = '0', '~' .. num(expires) .. '~' .. num(pickup)
  local member = pack_waiter(w, w.ttl)
  w.tag, w.instance = active_tag, active_instance
  return member
end

-- A ticket's record as the hash keeps it (`raw`), read: keep, pickup,
-- expires (numbers) and its entry; nil when none (or a tombstone).
local function parse_record(raw)
  if not raw then
    return nil
  end
  local keep, pickup, expires, member = string.match(raw, '^(%d+)|(%d+)|(%d+)|(.*)$')
  if not keep then
    return nil
  end
  return {keep = tonumber(keep), pickup = tonumber(pickup), expires = tonumber(expires),
    member = member}
end

-- A ticket's record (see above), read; nil when none.
local function ticket_record(id)
  return parse_record(redis.call('HGET', tickets_key(), id))
end

-- How long a grant to `waiter`, an active waiter of another instance (`id`
-- its id) that had `seq` in queue, is held unconfirmed: its ticket's pickup
-- when it keeps its place (a record that names this entry) and that is
-- longer than CONFIRM_MS, else nil (CONFIRM_MS). A waiter that keeps its
-- place has `seq` noted, to go back there should the grant lapse
-- (kept_back(), pruning.lua). One HGET, only for a grant to another
-- instance's waiter, and one HSET when it keeps its place.
local function kept_hold(id, waiter, seq)
  local rec = ticket_record(id)
  if not rec or rec.member ~= waiter then
    return nil
  end
  redis.call('HSET', tickets_key(), id .. ':q', num(seq))
  if rec.pickup > CONFIRM_MS then
    return rec.pickup
  end
  return nil
end

-- The name's turn notices due (see above).
local function notices_key()
  return string.sub(K_OWNERS, 1, -8) .. ':notices'
end

-- Keeps `until_ms` the deadline of `key` at least (a new key gets it).
local function keep_key_until(key, until_ms)
  redis.call('PEXPIREAT', key, num(until_ms), 'NX')
  redis.call('PEXPIREAT', key, num(until_ms), 'GT')
end

-- Writes ticket `id`'s record (and, when rec.notify is a URL, the turn
-- notice it asks, not delivered yet); the tickets hash, the queue and the
-- owners hash (with the line's sums) live until `until_ms` at least.
local function save_ticket(id, rec, until_ms)
  local key = tickets_key()
  local record = num(rec.keep) .. '|' .. num(rec.pickup) .. '|' .. num(rec.expires) .. '|' ..
    rec.member
  if rec.notify and rec.notify ~= '' then
    redis.call('HSET', key, id, record, id .. ':n', '0|' .. rec.notify)
  else
    redis.call('HSET', key, id, record)
  end
  keep_key_until(key, until_ms)
  keep_key_until(K_QUEUE, until_ms)
  keep_leases(until_ms, false)
end

-- Forgets ticket `id`'s record (and the notice it asked, and its place).
local function forget_ticket(id)
  redis.call('HDEL', tickets_key(), id, id .. ':n', id .. ':q')
end

-- Ticket `id` (`rec` its record) ended: not collected in time, left, or
-- its place expired. Its record, its notice and its noted place give way
-- to its tombstone (see above), which stands until its place would have
-- expired, and at least its keep_place from now; the hash lives as long.
-- Costs an HSET, an HDEL and the hash's TTL, only when a ticket ends.
local function end_ticket(id, rec)
  local key = tickets_key()
  local until_ms = math.max(rec.expires, now_ms + rec.keep)
  redis.call('HSET', key, id, 'x' .. num(until_ms))
  redis.call('HDEL', key, id .. ':n', id .. ':q')
  keep_key_until(key, until_ms)
  -- Tombstones past their time go as Redis's own expiry goes: a few fields
  -- looked at by chance at each end, those that are stale tombstones
  -- dropped, so a name that always has tickets (its hash never expires)
  -- keeps about as many stale ones as live ones, not every one ever.
  local sample = redis.call('HRANDFIELD', key, TOMBSTONE_SAMPLE, 'WITHVALUES')
  for i = 1, #sample, 2 do
    local stale = string.match(sample[i + 1], '^x(%d+)$')
    if stale and tonumber(stale) <= now_ms then
      redis.call('HDEL', key, sample[i])
    end
  end
end

-- Whether ticket `id` ended (its tombstone stands: see above), for a waiter
-- of that id that asks to rejoin the line. One HGET.
local function ticket_ended(id)
  local until_ms = string.match(redis.call('HGET', tickets_key(), id) or '', '^x(%d+)$')
  return until_ms ~= nil and tonumber(until_ms) > now_ms
end

-- Ticket `id` was granted while nobody waits on it, its lease held until
-- `pickup_by` (ms): when it asked a turn notice, the notice is due now, and
-- the caller is told (see above). One HEXISTS for a ticket that asked none.
local function notice_due(id, pickup_by)
  local tickets = tickets_key()
  if redis.call('HEXISTS', tickets, id .. ':n') == 0 then
    return
  end
  local key = notices_key()
  redis.call('ZADD', key, now_arg(), id)
  keep_key_until(key, pickup_by)
  keep_key_until(tickets, pickup_by)
  tell(ME, 'd 1')
end

-- Moves `waiter` (in queue) to `member`, in the same place.
local function replace_in_line(waiter, member)
  local score = redis.call('ZSCORE', K_QUEUE, waiter)
  if not score then
    return false
  end
  redis.call('ZREM', K_QUEUE, waiter)
  redis.call('ZADD', K_QUEUE, score, member)
  return true
end

-- `waiter` (`w` its fields) is found with its instance gone (or, a ticket,
-- its place expired). A waiter with a live record becomes a ticket in the
-- same place (w.member, w.instance and w.tag then say it): true. Else false,
-- and the caller takes it out of the line (a record left is forgotten).
local function orphan_kept(waiter, w)
  local rec = ticket_record(w.id)
  if not rec then
    return false
  end
  if rec.member ~= waiter then
    forget_ticket(w.id)
    return false
  end
  if string.byte(w.instance, 1) == 126 or rec.expires <= now_ms then
    -- Its place expired: the ticket ended.
    end_ticket(w.id, rec)
    return false
  end
  local member = ticket_form(w, rec.expires, rec.pickup)
  if not replace_in_line(waiter, member) then
    return false
  end
  redis.call('ZREM', K_BYINST, w.instance .. '|' .. waiter)
  rec.member = member
  save_ticket(w.id, rec, rec.expires)
  w.member, w.tag, w.instance = member, '0', string.match(member, '^[^|]*|%d+|([^|]*)|')
  return true
end
