-- Who holds a lock, without revealing the lease id.
--
-- KEYS[1]  the lease hash (prefix{lock:NAME})
--
-- Replies
--   {1, fencing_token, expires_in_ms, owner}   held; owner "" when none
--   {0}                                        free
local fields = redis.call('HMGET', KEYS[1], 'id', 'token', 'owner')
if not fields[1] then
  return {0}
end
return {1, tonumber(fields[2]), redis.call('PTTL', KEYS[1]), fields[3] or ''}
