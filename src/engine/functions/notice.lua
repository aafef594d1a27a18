-- Turn notices: claimed, told sent or failed by whichever instance delivers
-- them (core/tickets.lua; core/state.lua: KEYS, ARGV[1..2]). It writes only
-- the notices' own state (the name's notices zset, its tickets' ":n"
-- fields) and never serves the line. "forget" is on the service's index of
-- names with notices instead (KEYS[1]; ARGV[1..2] "").
--
-- ARGV[3]  mode:
--            "claim"   claims the notices due now (10 at most) for ARGV[4]
--                      ms, and forgets those whose grant is gone and the
--                      notices of tickets gone (HSCAN COUNT 100: about 100
--                      looked at; a small hash whole)
--            "sent"    ticket ARGV[4]'s notice was delivered
--            "failed"  ticket ARGV[4]'s delivery failed, ARGV[6] saying why
--                      (a short sentence): tried again in ARGV[5] ms
--            "forget"  drops ARGV[4] from the index while its score is
--                      still ARGV[5] (nothing asked a look since)
-- ARGV[4]  claim: how long a claim lasts (ms); else the ticket, or the
--          index's member
-- ARGV[5]  claim: when to look again at a name whose tickets still wait
--          (ms from now); failed: ms until the next try; forget: the score
-- ARGV[6]  failed: why
--
-- Replies
--   claim   {next_ms, n, ticket_1, url_1, fencing_token_1, pickup_by_ms_1, ...}
--           next_ms: when the name's notices should be looked at next (ms,
--           Redis clock): the earliest due, or now + ARGV[5] while a ticket
--           that asked a notice waits, or 0: none left
--   sent    {notified_at_ms}, or {0}: no such notice any more
--   failed  {1}: tried again then, or {0}: its grant is gone
--   forget  {1} dropped, or {0}
local mode = ARGV[3]
if mode == 'forget' then
  local score = redis.call('ZSCORE', K_OWNERS, ARGV[4])
  if score and tonumber(score) == tonumber(ARGV[5]) then
    redis.call('ZREM', K_OWNERS, ARGV[4])
    return {1}
  end
  return {0}
end

context()
local key, tickets = notices_key(), tickets_key()

-- Ticket `id`'s lease while it is held for pickup; nil otherwise (a
-- pending lease is never the solo: core/leases.lua).
local function pending(id)
  local lease = lease_of(redis.call('HGET', K_OWNERS, id))
  return lease and lease.pending and lease or nil
end

-- The URL of ticket `id`'s notice not delivered yet; nil when none.
local function undelivered(id)
  local notice = redis.call('HGET', tickets, id .. ':n')
  return notice and string.match(notice, '^0|([^\n]*)') or nil
end

if mode == 'claim' then
  local claim_ms, look_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
  local reply, claimed, dropped = {0, 0}, {}, {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', now_arg(), 'LIMIT', '0', '10')) do
    local lease, url = pending(id), undelivered(id)
    if lease and url then
      claimed[#claimed + 1] = id
      for _, v in ipairs({id, url, lease.token, lease.score}) do
        reply[#reply + 1] = v
      end
    else
      dropped[#dropped + 1] = id
    end
  end
  reply[2] = #claimed
  -- The notices of tickets gone (left, expired, collected, not collected).
  local scan = redis.call('HSCAN', tickets, '0', 'MATCH', '*:n', 'COUNT', '100')
  local waits, stale = scan[1] ~= '0', {}
  for i = 1, #scan[2], 2 do
    local id = string.sub(scan[2][i], 1, -3)
    local rec = ticket_record(id)
    if rec and (redis.call('ZSCORE', K_QUEUE, rec.member) or pending(id)) then
      waits = true
    else
      stale[#stale + 1] = scan[2][i]
    end
  end
  -- Checked; now the writes.
  for _, id in ipairs(claimed) do
    redis.call('ZADD', key, num(now_ms + claim_ms), id)
  end
  if #dropped > 0 then
    redis.call('ZREM', key, unpack(dropped))
  end
  if #stale > 0 then
    redis.call('HDEL', tickets, unpack(stale))
  end
  local first = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
  if #first > 0 then
    reply[1] = math.min(tonumber(first[2]), now_ms + look_ms)
  elseif waits then
    reply[1] = now_ms + look_ms
  end
  return reply
end

local id = ARGV[4]
local url = undelivered(id)
if mode == 'sent' then
  if not url then
    redis.call('ZREM', key, id)
    return {0}
  end
  redis.call('HSET', tickets, id .. ':n', num(now_ms) .. '|' .. url)
  redis.call('ZREM', key, id)
  return {now_ms}
end

-- "failed"
if not url or not pending(id) then
  redis.call('ZREM', key, id)
  return {0}
end
redis.call('HSET', tickets, id .. ':n', '0|' .. url .. '\n' .. ARGV[6])
redis.call('ZADD', key, num(now_ms + tonumber(ARGV[5])), id)
return {1}
