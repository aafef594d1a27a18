-- A name's history, newest first, never a lease id (core/state.lua: KEYS,
-- ARGV[1..2]; core/history.lua says what is kept). Writes nothing; bounded:
-- at most ARGV[3] leases of the name and ARGV[3] + 1 entries of its stream
-- (and the ids of those past the last HISTORY_MAX, which the stream's
-- approximate trim left: fewer than a node's, unless HISTORY_MAX was
-- lowered since the name's last lease).
--
-- ARGV[3]  how many entries at most (1 .. 100)
-- ARGV[4]  "" for the first page; else the cursor of the page before: a
--          stream id, the page holding what was written before it
--
-- Reply
--   {n, entry_1, ..., entry_n, next}
--   each entry 13 fields: how ("held", "released", "expired",
--   "force-released", "not-collected"), ended_ms (-1 while held), token,
--   weight, limit, acquired_ms, waited_ms, priority, owner, by, override
--   ("" none), expires_at_ms and ended_by (the token name that
--   force-released it, "" none); next: the cursor of the next page, ""
--   when none.
--   The first page begins with the name's leases that have not ended (at
--   most ARGV[3]: those held, newest first, then those expired unnoticed,
--   latest first), then the stream's entries, the latest written first.
read_state()
context()
local limit, before = tonumber(ARGV[3]), ARGV[4]
local reply, n = {0}, 0
if before == '' then
  local held, expired = {}, {}
  local leases = {}
  if SOLO then
    leases[1] = SOLO
  else
    for _, id in ipairs(redis.call('ZRANGE', K_LEASES, '0', num(limit - 1))) do
      local packed = redis.call('HGET', K_OWNERS, id)
      if packed then
        leases[#leases + 1] = parse_lease(packed)
      end
    end
  end
  for _, lease in ipairs(leases) do
    if not lease.provisional then
      if lease.live then
        held[#held + 1] = lease
      else
        expired[#expired + 1] = lease
      end
    end
  end
  table.sort(held, function(x, y) return x.token > y.token end)
  table.sort(expired, function(x, y) return x.expires_at > y.expires_at end)
  for _, lease in ipairs(held) do
    append_entry(reply, 'held', -1, lease)
  end
  for _, lease in ipairs(expired) do
    append_entry(reply, 'expired', lease.expires_at, lease)
  end
  n = #held + #expired
end
local room = limit - n
local start = '+'
if before ~= '' then
  start = '(' .. before
end
-- Only the last HISTORY_MAX entries are shown: those before them, which
-- the approximate trim (core/history.lua) kept, are not.
local stop = '-'
local len = HISTORY_MAX > 0 and redis.call('XLEN', K_HISTORY) or 0
if len > HISTORY_MAX then
  local older = redis.call('XRANGE', K_HISTORY, '-', '+', 'COUNT', num(len - HISTORY_MAX))
  stop = '(' .. older[#older][1]
end
local written = redis.call('XREVRANGE', K_HISTORY, start, stop, 'COUNT', num(room + 1))
local shown = math.min(room, #written)
for i = 1, shown do
  local fields = written[i][2]
  local how, ended, packed = string.match(fields[2], '^([^|]*)|(%d+)|(.*)$')
  append_entry(reply, how, tonumber(ended), parse_lease(packed), fields[3] == 'b' and fields[4])
end
reply[1] = n + shown
local next_page = ''
if #written > room then
  -- More were written before: from the last shown, or (a page of leases
  -- alone) from the stream's start.
  next_page = shown > 0 and written[shown][1] or '18446744073709551615-18446744073709551615'
end
reply[#reply + 1] = next_page
return reply
