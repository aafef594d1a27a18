-- End every lease of a name whoever holds it (an administrator's action), and
-- serve the line (line.lua: KEYS, ARGV[1..2]).
--
-- Replies, each ended by finish() (line.lua)
--   {1, ended, n, owner_1, token_1, ..., owner_n, token_n}
--       released every live lease: `ended` in all, the first n (<= 100) of
--       them with their owner ("" none) and fencing token, for the audit
--   {0}   nothing was held: nothing changed
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- One event "force-released" per lease for the first 100, then one without an
-- owner for the rest; the sorted set is unlinked, so Redis frees it in the
-- background. The fence, the latest limit and the line's sums stay.
read_state()
guard()
if SOLO then
  -- The name's only lease (line.lua): ended, or forgotten when it expired.
  redis.call('HDEL', K_OWNERS, 'solo')
  local lease = SOLO
  SOLO = nil
  if lease.live then
    event('force-released', lease.owner, lease.token, 0)
    serve_line(0, false)
    return finish({1, 1, 1, lease.owner, lease.token})
  end
  note_expired(lease.owner, lease.token)
end
local first = first_lease()
local count = holders()
if count == 0 then
  serve_line(0, first ~= nil)
  return finish({0})
end
local shown = redis.call('ZRANGEBYSCORE', K_LEASES, '(' .. now_arg(), '+inf', 'LIMIT', '0', '100')
local announced = {}
for _, id in ipairs(shown) do
  local lease = lease_of(redis.call('HGET', K_OWNERS, id))
  if lease then
    announced[#announced + 1] = {lease.owner, lease.token}
  end
end
redis.call('UNLINK', K_LEASES, K_OWNERS)
-- The owners hash starts afresh with what outlives the leases (the line's
-- sums among it); "slow" stays until finish() sees the line empty, so that
-- no fast acquire overtakes a waiter meanwhile.
UNTIL, USED, USED_DIRTY, QUEUED_DIRTY = now_ms + 2 * KEEP_MS, 0, false, false
redis.call('HSET', K_OWNERS, 'limit', num(LIMIT), 'fence', num(FENCE), 'until', num(UNTIL),
  'slow', '1', 'queued', queued_field())
SLOW = true
redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
local reply = {1, count, #announced}
for _, lease in ipairs(announced) do
  event('force-released', lease[1], lease[2], 0)
  reply[#reply + 1] = lease[1]
  reply[#reply + 1] = lease[2]
end
if count > #announced then
  event('force-released', nil, nil, 0)
end
serve_line(0, false)
return finish(reply)
