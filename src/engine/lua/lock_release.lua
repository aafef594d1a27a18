-- Release a lock held by the given lease, and wake the waiters of every instance.
--
-- KEYS[1]  the lease hash (prefix{lock:NAME})
-- ARGV[1]  lease id of the holder
-- ARGV[2]  pub/sub channel of release events (prefix + "events")
-- ARGV[3]  event payload ("lock:NAME")
--
-- Replies
--   1   released
--   0   no such lease (expired, released already, or another holder's): nothing changed
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
