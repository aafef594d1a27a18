-- Read a lease if it is still held by the given id.
--
-- KEYS[1]  the lease hash (prefix{lock:NAME})
-- ARGV[1]  lease id of the holder
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, owner}   held; owner "" when none
--   {0}                                                no such lease
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then
  return {0}
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local fields = redis.call('HMGET', KEYS[1], 'token', 'ttl', 'owner')
return {1, tonumber(fields[1]), now_ms + redis.call('PTTL', KEYS[1]), tonumber(fields[2]),
  fields[3] or ''}
