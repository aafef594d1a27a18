-- Read a live lease by its id (core/state.lua: KEYS, ARGV[1..2]); writes
-- nothing.
--
-- ARGV[3]  lease id
--
-- Replies
--   {1, fencing_token, expires_at_ms, ttl_ms, limit, weight, owner}   live; owner "" when none
--   {0}                                                               no live lease
local lease = lease_for(ARGV[3], read_state(ARGV[3]))
if not lease then
  return {0}
end
return {1, lease.token, lease.expires_at, lease.ttl, lease.limit, lease.weight, lease.owner}
