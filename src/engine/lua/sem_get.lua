-- Read a semaphore lease if it is still live.
--
-- KEYS[1]  leases   sorted set: lease id -> expiry (ms)
-- KEYS[2]  owners   hash: lease id -> "token:ttl_ms:limit:owner"
-- ARGV[1]  lease id
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, owner}   live; owner "" when none
--   {0}                                                       no live lease
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local packed = redis.call('HGET', KEYS[2], ARGV[1])
if not score or not packed or tonumber(score) <= now_ms then
  return {0}
end
local token, ttl, limit, owner = string.match(packed, '^(%d+):(%d+):(%d+):(.*)$')
return {1, tonumber(token), tonumber(score), tonumber(ttl), tonumber(limit), owner}
