-- End every lease of a name whoever holds it (an administrator's action), and
-- serve the line (line.lua: KEYS, ARGV[1..5]).
--
-- Replies
--   {1}   released (every live lease)
--   {0}   nothing was held: nothing changed
--   each followed by the expired leases it noticed (line.lua: noticed())
--
-- One event "force-released" per lease for the first 100, then one without an
-- owner for the rest; the sorted set is unlinked, so Redis frees it in the background.
end_expired()
local count = holders()
if count == 0 then
  serve_line()
  return noticed({0})
end
local shown = redis.call('ZRANGEBYSCORE', K_LEASES, AFTER_NOW, '+inf', 'LIMIT', '0', '100')
local limit = redis.call('HGET', K_OWNERS, 'limit')
local announced = {}
for _, id in ipairs(shown) do
  local packed = redis.call('HGET', K_OWNERS, id)
  if packed then
    local token, _, _, _, owner = unpack_lease(packed)
    announced[#announced + 1] = {owner, tonumber(token)}
  end
end
redis.call('UNLINK', K_LEASES, K_OWNERS)
if limit then
  redis.call('HSET', K_OWNERS, 'limit', limit)
  redis.call('PEXPIRE', K_OWNERS, num(LINE_TTL_MS + FENCE_SLACK_MS))
end
for _, lease in ipairs(announced) do
  event('force-released', lease[1], lease[2])
end
if count > #announced then
  event('force-released')
end
serve_line()
return noticed({1})
