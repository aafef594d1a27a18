-- Extend a lease that is still held by the given id.
--
-- KEYS[1]  the lease hash (prefix{lock:NAME})
-- ARGV[1]  lease id of the holder
-- ARGV[2]  new ttl in milliseconds, or "" to reuse the lease's own ttl
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, owner}   refreshed; owner "" when none
--   {0}                                                no such lease: nothing changed
--
-- An expired lease is gone from Redis already, so it can never be brought back.
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then
  return {0}
end
local ttl = ARGV[2]
if ttl == '' then
  ttl = redis.call('HGET', KEYS[1], 'ttl')
else
  redis.call('HSET', KEYS[1], 'ttl', ttl)
end
ttl = tonumber(ttl)
redis.call('PEXPIRE', KEYS[1], ttl)

local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local fields = redis.call('HMGET', KEYS[1], 'token', 'owner')
return {1, tonumber(fields[1]), now_ms + ttl, ttl, fields[2] or ''}
