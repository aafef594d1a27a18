-- Take a slot of a fair counting semaphore, or join its queue of waiters.
--
-- KEYS[1]  leases   sorted set: lease id -> expiry (ms, Redis clock)
-- KEYS[2]  owners   hash: lease id -> "token:ttl_ms:limit:owner"; field "limit" = latest limit
-- KEYS[3]  queue    sorted set: waiting lease id -> ticket (order of arrival)
-- KEYS[4]  deadlines sorted set: waiting lease id -> give-up time (ms, Redis clock)
-- KEYS[5]  fence    counter of tickets and fencing tokens, no expiry
-- ARGV[1]  lease id (UUID)
-- ARGV[2]  limit (1 .. 100000), judged for this acquisition only
-- ARGV[3]  ttl in milliseconds
-- ARGV[4]  owner label, "" for none
-- ARGV[5]  how long the caller will wait, in milliseconds; 0: do not queue
-- ARGV[6]  pub/sub channel of release events (prefix + "events")
-- ARGV[7]  event payload ("sem:NAME")
--
-- Replies
--   {1, fencing_token, expires_at_ms}               acquired
--   {0, holders, next_expiry_in_ms, ticket}         full; next_expiry_in_ms -1 when no lease
--                                                   ticket 0 when not queued
--
-- A slot is granted when the holders plus the waiters queued ahead of the caller
-- leave room under the limit, so a newcomer never overtakes a queued waiter.
local now = redis.call('TIME')
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
local now_ms = math.floor(now_us / 1000)
local id, limit, ttl, wait = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])

local function extend(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end

local function next_token()
  local token = tonumber(redis.call('GET', KEYS[5]) or '0') + 1
  if token < now_us then token = now_us end
  redis.call('SET', KEYS[5], string.format('%d', token))
  return token
end

-- Leases past their expiry and waiters past their deadline are gone.
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms)
for i = 1, #expired do redis.call('HDEL', KEYS[2], expired[i]) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms) end
local late = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms)
for i = 1, #late do redis.call('ZREM', KEYS[3], late[i]) end
if #late > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now_ms) end

local holders = redis.call('ZCARD', KEYS[1])
local rank = redis.call('ZRANK', KEYS[3], id)
local queued = rank ~= false
if not queued then rank = redis.call('ZCARD', KEYS[3]) end

if holders + rank < limit then
  local token = next_token()
  local packed = string.format('%d', token) .. ':' .. ARGV[3] .. ':' .. ARGV[2] .. ':' .. ARGV[4]
  redis.call('ZADD', KEYS[1], now_ms + ttl, id)
  redis.call('HSET', KEYS[2], id, packed, 'limit', ARGV[2])
  extend(KEYS[1], ttl)
  extend(KEYS[2], ttl)
  if queued then
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
  end
  -- Room left for the next waiter in line: wake it.
  if holders + 1 < limit and redis.call('ZCARD', KEYS[3]) > 0 then
    redis.call('PUBLISH', ARGV[6], ARGV[7])
  end
  return {1, token, now_ms + ttl}
end

-- A newcomer found room that belongs to the queue: make sure its head is awake.
if not queued and holders < limit and rank > 0 then
  redis.call('PUBLISH', ARGV[6], ARGV[7])
end

local ticket = 0
if queued then
  ticket = tonumber(redis.call('ZSCORE', KEYS[3], id))
elseif wait > 0 then
  ticket = next_token()
  redis.call('ZADD', KEYS[3], ticket, id)
  redis.call('ZADD', KEYS[4], now_ms + wait, id)
  extend(KEYS[3], wait)
  extend(KEYS[4], wait)
end

local next_expiry = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then next_expiry = tonumber(first[2]) - now_ms end
return {0, holders, next_expiry, ticket}
