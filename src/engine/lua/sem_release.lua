-- Give back a semaphore slot, or leave its queue of waiters.
--
-- KEYS[1]  leases    sorted set: lease id -> expiry (ms)
-- KEYS[2]  owners    hash: lease id -> "token:ttl_ms:limit:owner"
-- KEYS[3]  queue     sorted set: waiting lease id -> ticket
-- KEYS[4]  deadlines sorted set: waiting lease id -> give-up time (ms)
-- ARGV[1]  lease id
-- ARGV[2]  pub/sub channel of release events (prefix + "events")
-- ARGV[3]  event payload ("sem:NAME")
--
-- Replies
--   1   a live lease was released and the waiters woken
--   0   no live lease with that id (expired, released already, unknown): nothing
--       is held by it afterwards; a queued waiter with that id has left the queue
local id = ARGV[1]
local left = redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
if left == 1 and redis.call('ZCARD', KEYS[3]) > 0 then
  -- whoever was behind it may fit now
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end

local score = redis.call('ZSCORE', KEYS[1], id)
if not score then
  return 0
end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)

local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if tonumber(score) <= now_ms then
  return 0
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
