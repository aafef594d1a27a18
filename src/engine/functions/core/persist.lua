-- The lease core, part 3: how a call reads a name's state (read_state())
-- and saves it (save()), the line's sums, seqs, TTLs and fencing tokens.

-- The owners hash's fields read_state() takes, with `id`'s packed lease when
-- `id` is given, in one call.
local function read_fields(id)
  return redis.call('HMGET', K_OWNERS, 'fence', 'until', 'solo', 'slow', 'used', 'limit',
    'queued', 'ranked', id or 'used', 'follow', 'qlimit')
end

-- Whether the fields read_fields() read say that someone follows a lease
-- of the name (a holder's stream is open on it).
local function followed(read)
  return read[10] ~= false and tonumber(read[10]) > now_ms
end

-- Takes the fields read_fields() read (see above); returns `id`'s packed
-- lease.
local function take_state(read)
  context()
  OWNED = read[1] ~= false
  FENCE, UNTIL = tonumber(read[1] or '0'), tonumber(read[2] or '0')
  if read[3] then
    SOLO = parse_solo(read[3])
  end
  SLOW = read[4] == '1'
  FOLLOWED = followed(read)
  USED, LIMIT, LIMIT_RAW = tonumber(read[5] or '0'), tonumber(read[6] or '0'), read[6]
  if read[7] then
    local count, weight = string.match(read[7], '^(%d+)|(%d+)$')
    QUEUED_N, QUEUED_W = tonumber(count), tonumber(weight)
  end
  QUEUED_L_RAW = tonumber(read[11] or '0')
  QUEUED_L = QUEUED_N > 0 and QUEUED_L_RAW or 0
  if read[8] and read[8] ~= '' then
    RANKED = {}
    for p, count, weight in string.gmatch(read[8], '(%d):(%d+):(%d+)') do
      RANKED[tonumber(p)] = {tonumber(count), tonumber(weight)}
    end
  end
  return read[9] or nil
end

-- Reads the owners hash's fields (see above) with `id`'s packed lease when
-- `id` is given (returned), in one call. Every function begins with it.
-- (`id` may name another field of the hash the caller wants: "lost".)
local function read_state(id)
  local packed = take_state(read_fields(id))
  if id then
    return packed
  end
end

-- The line's sums as the owners hash keeps them.
local function queued_field()
  return num(QUEUED_N) .. '|' .. num(QUEUED_W)
end

-- The "ranked" field (see above) of RANKED.
local function ranked_field()
  local parts = {}
  if RANKED then
    for p = 1, 9 do
      local r = RANKED[p]
      if r and (r[1] > 0 or r[2] > 0) then
        parts[#parts + 1] = num(p) .. ':' .. num(r[1]) .. ':' .. num(r[2])
      end
    end
  end
  return table.concat(parts, ',')
end

-- Adds `count` waiters of `weight` at `priority` to `ranked` (priority ->
-- {count, weight}; nil: none yet), never below 0: the one way the sums of
-- each priority are counted (the line's, a scan's). Returns `ranked`.
local function add_ranked(ranked, priority, count, weight)
  ranked = ranked or {}
  local r = ranked[priority] or {0, 0}
  r[1], r[2] = math.max(0, r[1] + count), math.max(0, r[2] + weight)
  ranked[priority] = r
  return ranked
end

-- The weight in `ranked` (as add_ranked() counts it) at `priority` and
-- above: the one way the sums of each priority are read.
local function ranked_from(ranked, priority)
  local weight = 0
  if ranked then
    for p = priority, 9 do
      weight = weight + (ranked[p] and ranked[p][2] or 0)
    end
  end
  return weight
end

-- The line gained (or lost, negative) `count` waiters of `weight` in all,
-- of `priority` (a number).
local function count_queued(count, weight, priority, limit)
  if limit and (QUEUED_N == 0 or limit > QUEUED_L) then
    -- (Only when a line holds waiters of more than one limit does it matter:
    -- serve_line() looks further only while used + ahead stays under it.)
    QUEUED_L = limit
  end
  QUEUED_N, QUEUED_W = math.max(0, QUEUED_N + count), math.max(0, QUEUED_W + weight)
  QUEUED_DIRTY = true
  if priority > 0 then
    RANKED, RANKED_DIRTY = add_ranked(RANKED, priority, count, weight), true
  end
end

-- The line's sums are `count` waiters of `weight`, and `ranked` (priority
-- -> {count, weight}, nil: none above 0) for the priorities above 0, as a
-- call saw it whole, and `limit` the largest limit among them.
local function set_queued(count, weight, ranked, limit)
  if QUEUED_N ~= count or QUEUED_W ~= weight then
    QUEUED_N, QUEUED_W, QUEUED_DIRTY = count, weight, true
  end
  QUEUED_L = limit
  if ranked or RANKED then
    local before = ranked_field()
    RANKED = ranked
    RANKED_DIRTY = RANKED_DIRTY or ranked_field() ~= before
  end
end

-- The weight queued at `priority` and above, as the line's sums count it.
local function queued_from(priority)
  if priority == 0 then
    return QUEUED_W
  end
  return ranked_from(RANKED, priority)
end

-- Takes `waiter` (its fields unpacked; `weight` and `priority` numbers) out
-- of the line, and out of the line's sums if it was in it.
local function remove_waiter(waiter, instance, weight, newest, priority)
  if redis.call('ZREM', K_QUEUE, waiter) == 1 then
    count_queued(-1, -weight, priority)
  end
  redis.call('ZREM', K_BYINST, instance .. '|' .. waiter)
  if newest == '1' and redis.call('HGET', K_NOTES, 'newest') == waiter then
    redis.call('HDEL', K_NOTES, 'newest')
  end
end

-- Writes what the call changed of the owners hash and has not written yet:
-- the weight in use, the line's sums (and their loss), and "slow" cleared
-- once leases and queue are empty. Nothing without "until": the hash is gone
-- (or never was), and a field written now would make it without a TTL.
local function save()
  -- The largest limit in line is written only when it changed while some
  -- wait (an empty line's is not read), so a name whose waiters share one
  -- limit writes it once.
  local qlimit = QUEUED_N > 0 and QUEUED_L ~= QUEUED_L_RAW
  if UNTIL > 0 and (USED_DIRTY or QUEUED_DIRTY or RANKED_DIRTY or LOST or qlimit or
      (SLOW and USED == 0 and QUEUE_EMPTY)) then
    local fields = {}
    if qlimit then
      fields[#fields + 1], fields[#fields + 2] = 'qlimit', num(QUEUED_L)
    end
    if USED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'used', num(USED)
    end
    if QUEUED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'queued', queued_field()
    end
    if RANKED_DIRTY then
      fields[#fields + 1], fields[#fields + 2] = 'ranked', ranked_field()
    end
    if LOST then
      fields[#fields + 1], fields[#fields + 2] = 'lost', num(LOST)
    end
    if SLOW and USED == 0 and QUEUE_EMPTY and redis.call('EXISTS', K_LEASES) == 0 then
      -- Back to the fast path: nothing in leases (checked, not only
      -- counted) and nobody in line.
      fields[#fields + 1], fields[#fields + 2] = 'slow', '0'
      SLOW = false
    end
    if #fields > 0 then
      redis.call('HSET', K_OWNERS, unpack(fields))
    end
    USED_DIRTY, QUEUED_DIRTY, RANKED_DIRTY, LOST = false, false, false, nil
  end
end

-- Live leases: the count of those not yet expired, the solo or in leases.
-- (The one count of leases every event shows, so it comes before them:
-- leases.lua has the rest of what looks at either.)
local function holders()
  if SOLO then
    return SOLO.live and 1 or 0
  end
  return redis.call('ZCOUNT', K_LEASES, '(' .. now_arg(), '+inf')
end

-- Requests in line.
local function waiting()
  return redis.call('ZCARD', K_QUEUE)
end

-- The seq (see above) of a waiter of `priority` (a number) joining the
-- line now: after the last of its priority, before every lower one. Also
-- whether it found none at its priority or above (the line may be new).
local function seq(priority)
  local t = now_us - priority * PRIORITY_STEP
  local last = redis.call('ZRANGE', K_QUEUE, '(' .. num(t + PRIORITY_STEP / 2), '-inf',
    'BYSCORE', 'REV', 'LIMIT', '0', '1', 'WITHSCORES')
  if #last > 0 and tonumber(last[2]) >= t then
    t = tonumber(last[2]) + 1
  end
  return t, #last == 0
end

-- When a waiter of `priority` (a number) with `seq` (its score in queue)
-- joined the line (ms).
local function joined_ms(seq, priority)
  return math.floor((seq + priority * PRIORITY_STEP) / 1000)
end

-- The line's keys live LINE_TTL_MS past the last touch.
local function touch_line()
  for _, key in ipairs({K_BYINST, K_INSTANCES, K_NOTES}) do
    redis.call('PEXPIRE', key, num(LINE_TTL_MS))
  end
  -- The queue may hold tickets, whose places outlive this (core/tickets.lua):
  -- never shortened, only given a TTL or extended.
  redis.call('PEXPIRE', K_QUEUE, num(LINE_TTL_MS), 'NX')
  redis.call('PEXPIRE', K_QUEUE, num(LINE_TTL_MS), 'GT')
end

-- How long a name's leases and owners outlive its last lease (ms): KEEP_MS,
-- or with history as long as it is kept (an expired lease reads as expired
-- from its own fields until then: core/history.lua).
local function keep_ms()
  terms()
  return HISTORY_MAX > 0 and HISTORY_MS or KEEP_MS
end

-- Leases and owners (with the fence) outlive `full` (ms) by keep_ms() at
-- least; when extended, by KEEP_MS more, so that the next leases need
-- nothing for a while; the history key with them. `fresh`: the leases key
-- may be new, and then needs its TTL.
local function keep_leases(full, fresh)
  local keep = keep_ms()
  if full + keep > UNTIL then
    UNTIL = full + keep + KEEP_MS
    redis.call('HSET', K_OWNERS, 'until', num(UNTIL))
    redis.call('PEXPIREAT', K_OWNERS, num(UNTIL))
    if K_LEASES then
      -- (Not named on a fast path: leases is empty there.)
      redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
    end
    if HISTORY_MAX > 0 then
      redis.call('PEXPIREAT', K_HISTORY, num(UNTIL))
    end
  elseif fresh then
    redis.call('PEXPIREAT', K_LEASES, num(UNTIL))
  end
  OWNED = true
end

-- The first thing every operation that may grant does after read_state(),
-- before any write: Redis does not roll back a function that fails half-way,
-- so a refusal must come while nothing has changed. It refuses when the
-- tokens this call could take (at most one per waiter it looks at, and one
-- of its own) might pass 2^53, where Lua numbers stop being exact.
local function guard()
  if math.max(FENCE, now_us) + SCAN_BATCH + 1 > MAX_SAFE then
    error({err = 'BATON fencing counter near 2^53: tokens can no longer grow exactly; nothing was changed'})
  end
end

-- The next fencing token. Every caller ran guard() first, so FENCE is known
-- and the token stays exact.
local function next_token()
  local token = FENCE + 1
  if token < now_us then
    token = now_us
  end
  FENCE = token
  return token
end
