-- End every lease of a name whoever holds it (an administrator's action), and
-- serve the line (core/state.lua: KEYS, ARGV[1..2]).
--
-- ARGV[3]  the name of the token that asks ("" none: auth off), which each
--          ended lease's history entry carries as its ended_by
--
-- Replies, each ended by finish() (core/messages.lua)
--   {1, ended, n, owner_1, token_1, ..., owner_n, token_n}
--       released every live lease: `ended` in all, the first n (<= 100) of
--       them with their owner ("" none) and fencing token, for the audit
--   {0}   nothing was held: nothing changed
--   error "BATON fencing counter near 2^53 ..." (guard(), before any write)
--
-- One event "force-released" per lease for the first 100, then one without an
-- owner for the rest (end_every_lease(), core/leases.lua, unlinks the leases,
-- so Redis frees them in the background). The fence, the latest limit and the
-- line's sums stay. While someone follows a lease of the name, "f FENCE"
-- tells every holder's stream on it that its lease ended (core/messages.lua).
read_state()
guard()
local count, ended, kept = end_every_lease()
if count == 0 then
  serve_line(0, kept)
  return finish({0})
end
tell_followers('f ' .. num(FENCE))
local reply, shown = {1, count, 0}, 0
for _, lease in ipairs(ended) do
  if lease then
    remember(lease, 'force-released', now_ms, ARGV[3])
    event('force-released', lease.owner, lease.token, 0)
    reply[#reply + 1] = lease.owner
    reply[#reply + 1] = lease.token
    shown = shown + 1
  end
end
reply[3] = shown
if count > shown then
  event('force-released', nil, nil, 0)
end
serve_line(0, false)
return finish(reply)
