-- The live leases of a semaphore, without their ids.
--
-- KEYS[1]  leases   sorted set: lease id -> expiry (ms)
-- KEYS[2]  owners   hash: lease id -> "token:ttl_ms:limit:owner"; field "limit"
--
-- Reply
--   {limit, fencing_token_1, expires_in_ms_1, owner_1, fencing_token_2, ...}
--   limit is that of the latest acquisition, 0 when the semaphore was never used
--   (or all its leases are long gone); owner "" when none
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local reply = {tonumber(redis.call('HGET', KEYS[2], 'limit') or '0')}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local packed = redis.call('HGET', KEYS[2], live[i])
  if packed then
    local token, _, _, owner = string.match(packed, '^(%d+):(%d+):(%d+):(.*)$')
    reply[#reply + 1] = tonumber(token)
    reply[#reply + 1] = tonumber(live[i + 1]) - now_ms
    reply[#reply + 1] = owner
  end
end
return reply
