-- Extend a semaphore lease that has not expired yet.
--
-- KEYS[1]  leases   sorted set: lease id -> expiry (ms)
-- KEYS[2]  owners   hash: lease id -> "token:ttl_ms:limit:owner"
-- ARGV[1]  lease id
-- ARGV[2]  new ttl in milliseconds, or "" to reuse the lease's own ttl
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, owner}   refreshed; owner "" when none
--   {0}   no live lease: an expired one is removed, never brought back
local id = ARGV[1]
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)

local score = redis.call('ZSCORE', KEYS[1], id)
local packed = redis.call('HGET', KEYS[2], id)
if not score or not packed or tonumber(score) <= now_ms then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  return {0}
end

local token, ttl, limit, owner = string.match(packed, '^(%d+):(%d+):(%d+):(.*)$')
if ARGV[2] ~= '' then
  ttl = ARGV[2]
  redis.call('HSET', KEYS[2], id, token .. ':' .. ttl .. ':' .. limit .. ':' .. owner)
end
ttl = tonumber(ttl)
redis.call('ZADD', KEYS[1], 'XX', now_ms + ttl, id)
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return {1, tonumber(token), now_ms + ttl, ttl, tonumber(limit), owner}
