-- Acquire a lock if nobody holds it.
--
-- KEYS[1]  the lease hash   (prefix{lock:NAME}), fields id, token, ttl, owner
-- KEYS[2]  the fencing counter (prefix{lock:NAME}:fence), no expiry
-- ARGV[1]  lease id (UUID) of the new lease
-- ARGV[2]  ttl in milliseconds (1 .. 86400000)
-- ARGV[3]  owner label, "" for none
--
-- Replies
--   {1, fencing_token, expires_at_ms}   acquired; expires_at_ms on Redis's clock
--   {0, expires_in_ms, owner}           held by someone else; owner "" when none
--
-- The fencing token is max(counter + 1, now in microseconds), so it keeps rising
-- even when Redis lost the counter in a restart.
local held = redis.call('HGET', KEYS[1], 'id')
if held then
  return {0, redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'owner') or ''}
end

local now = redis.call('TIME')
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
local now_ms = math.floor(now_us / 1000)
local ttl = tonumber(ARGV[2])

local token = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if token < now_us then token = now_us end
redis.call('SET', KEYS[2], string.format('%d', token))

if ARGV[3] == '' then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'token', string.format('%d', token), 'ttl', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'token', string.format('%d', token), 'ttl', ARGV[2],
    'owner', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, token, now_ms + ttl}
