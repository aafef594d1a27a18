-- Release a lock whoever holds it (an administrator's action), and wake the waiters.
--
-- KEYS[1]  the lease hash (prefix{lock:NAME})
-- ARGV[1]  pub/sub channel of release events (prefix + "events")
-- ARGV[2]  event payload ("lock:NAME")
--
-- Replies
--   1   released
--   0   the lock was not held: nothing changed
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
