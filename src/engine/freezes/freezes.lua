-- The list of freezes, kept apart from every name's keys: this is not a
-- name's function (core/state.lua's begin() takes Redis's clock for it, and
-- nothing else of the lease core is used). Each instance holds the list in
-- memory and reads it whole only when its version changed (and every few
-- seconds, as a safety net), so no acquisition reads it.
--
-- KEYS[1]  the index: "prefix{freezes}:index", zset: the key of each freeze
--          -> when that key expires (ms; "+inf" for a recurring freeze, which
--          lives until it is deleted). Each freeze is a string key beside it
--          ("prefix{freezes}:ID", one hash tag: one cluster slot, apart from
--          every name's), its JSON as freezes/function.rs writes it.
--          The index expires with its last one-off freeze, or lives while it
--          names a recurring one (written only by an administrator).
--          Beside it, "prefix{freezes}:version": the list's version, a
--          number that every put and delete raises (max(version + 1, now in
--          microseconds), so it never comes back to an earlier value after
--          Redis lost it); it lives as the index does (KEEP_MS once the index
--          is empty). Missing reads as "0" (then the list is empty, or only
--          one-off freezes whose windows are over are left in it).
--          Each instance checks it when a call that may grant needs a fresh
--          list (freezes/book.rs): its list counts as fresh only while the
--          version it was read at is still Redis's.
--          Beside it too, "prefix{freezes}:by:TOKEN" for each token name that
--          made freezes: a zset of the keys of its freezes -> when each
--          expires, as in the index; it expires with its last one-off freeze
--          or lives while it names a recurring one. It counts what one name
--          keeps in force (ARGV[9]).
-- ARGV[1..2] "" (no events channel, no context)
-- ARGV[3]  "list", "version", "put" or "delete"
-- ARGV[4]  put, delete: the freeze's key
-- ARGV[5]  put: the freeze, as JSON
-- ARGV[6]  put: when its key expires (ms, Redis's clock); "0": never
-- ARGV[7]  put, delete: the channel every instance hears changes on
-- ARGV[8]  put: the key of its maker's zset ("prefix{freezes}:by:TOKEN");
--          "": made without a token (a service without tokens), not counted
-- ARGV[9]  put: how many freezes in force one token name may keep
-- ARGV[10] put: "1" when its maker may go past MAX_FREEZES (an admin of
--          every name), else "0"
--
-- Replies
--   list:    {n, version, now_ms, key, json, key, json, ...}: every freeze
--            whose key is still there (an expired one-off leaves the index
--            here), the version they are, and when they were read (Redis's
--            clock, ms: a name's call carries when its list stops being
--            fresh, core/state.lua)
--   version: {version, now_ms}
--   put:     {1} written; {0} its window is over already (nothing written);
--            {-1} the list is full (MAX_FREEZES; nothing written); {-2} its
--            maker keeps ARGV[9] freezes in force already (nothing written)
--   delete:  {1} deleted; {0} no such freeze
local MAX_FREEZES = 1000
local index, mode = KEYS[1], ARGV[3]
local base = string.sub(index, 1, -6)
local version_key = base .. 'version'

local function version()
  return redis.call('GET', version_key) or '0'
end

if mode == 'version' then
  return {version(), now_ms}
end

-- The index lives as long as its longest-lived freeze, and the version with
-- it; a change raises the version (written last: nothing is checked after).
local function keep_index()
  local v = num(math.max(tonumber(version()) + 1, now_us))
  local last = redis.call('ZRANGE', index, '-1', '-1', 'WITHSCORES')
  if #last == 0 then
    redis.call('SET', version_key, v, 'PX', num(KEEP_MS))
  elseif last[2] == 'inf' then
    redis.call('PERSIST', index)
    redis.call('SET', version_key, v)
  else
    redis.call('PEXPIREAT', index, last[2])
    redis.call('SET', version_key, v, 'PXAT', last[2])
  end
end

if mode == 'list' then
  redis.call('ZREMRANGEBYSCORE', index, '-inf', num(now_ms))
  local keys = redis.call('ZRANGE', index, '0', '-1')
  local reply = {0, version(), now_ms}
  if #keys == 0 then
    return reply
  end
  local values = redis.call('MGET', unpack(keys))
  for i, key in ipairs(keys) do
    if values[i] then
      reply[#reply + 1], reply[#reply + 2] = key, values[i]
    else
      redis.call('ZREM', index, key)
    end
  end
  reply[1] = (#reply - 3) / 2
  return reply
end

-- A maker's zset lives as long as its longest-lived freeze.
local function keep_by(by)
  local last = redis.call('ZRANGE', by, '-1', '-1', 'WITHSCORES')
  if #last == 0 then
    return
  elseif last[2] == 'inf' then
    redis.call('PERSIST', by)
  else
    redis.call('PEXPIREAT', by, last[2])
  end
end

local key, channel = ARGV[4], ARGV[7]
if mode == 'put' then
  local expires = tonumber(ARGV[6])
  local by, per_name, beyond = ARGV[8], tonumber(ARGV[9]), ARGV[10] == '1'
  if expires ~= 0 and expires <= now_ms then
    return {0}
  end
  redis.call('ZREMRANGEBYSCORE', index, '-inf', num(now_ms))
  if not beyond and redis.call('ZCARD', index) >= MAX_FREEZES
      and not redis.call('ZSCORE', index, key) then
    return {-1}
  end
  if by ~= '' then
    redis.call('ZREMRANGEBYSCORE', by, '-inf', num(now_ms))
    if redis.call('ZCARD', by) >= per_name and not redis.call('ZSCORE', by, key) then
      return {-2}
    end
  end
  local score = expires == 0 and '+inf' or num(expires)
  if expires == 0 then
    redis.call('SET', key, ARGV[5])
  else
    redis.call('SET', key, ARGV[5], 'PXAT', num(expires))
  end
  redis.call('ZADD', index, score, key)
  if by ~= '' then
    redis.call('ZADD', by, score, key)
    keep_by(by)
  end
  keep_index()
  redis.call('PUBLISH', channel, 'put')
  return {1}
end

-- delete: from its maker's zset too (named in the freeze itself)
local stored = redis.call('GET', key)
if stored then
  local ok, freeze = pcall(cjson.decode, stored)
  if ok and type(freeze) == 'table' and type(freeze.by) == 'string' then
    local by = base .. 'by:' .. freeze.by
    redis.call('ZREM', by, key)
    keep_by(by)
  end
end
local listed = redis.call('ZREM', index, key)
local existed = redis.call('DEL', key)
if listed == 0 and existed == 0 then
  return {0}
end
keep_index()
redis.call('PUBLISH', channel, 'delete')
return {existed}
