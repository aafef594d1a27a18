-- The lease core, part 5: what a call tells. Instances hear about their
-- waiters (tell()), watchers about every change (event()), and the caller
-- hears the rest in the tail of its reply (finish()).
--
-- Messages for an instance about its waiters, fields separated by one space; the
-- caller's own come back in the reply (finish()), the others' go out on the
-- name's channel:
--   G TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS   waiter TAG was granted a lease with
--                                             that token, expiry and time left
--   g TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS   the same, provisional: Redis lets it go
--                                             in EXPIRES_IN_MS unless its instance
--                                             confirms it, which that instance does
--                                             (acquire.lua with the waiter's id)
--                                             before it answers its client
--   s TAG OWNER                               waiter TAG was superseded by a newer
--                                             newest_wins request of OWNER ("" none)
--   x EXPIRES_IN_MS                           a lease now ends sooner: wake the line then
--   d 1                                       (the caller's only) a ticket's turn notice
--                                             is due on the name (core/tickets.lua)
-- (engine/channel/message.rs decodes them.) Messages for the holders' streams, on the same
-- channel and only while someone follows a lease of the name (FOLLOWED,
-- state.lua), each naming a lease by its fencing token, never by its id:
--   r TOKEN EXPIRES_AT_MS TTL_MS              lease TOKEN was refreshed
--   l TOKEN REASON                            lease TOKEN ended: "released" by
--                                             its holder
--   f FENCE                                   every lease up to FENCE was
--                                             force-released
--   y WAITING\nBY\nREASON                     someone (BY, "" none) asks the
--                                             holders to finish early (REASON)
-- (engine/channel/message.rs decodes them too.)
--
-- Every serving operation ends its reply with finish(): the expired leases it
-- noticed (n, then n pairs owner ("" none), fencing_token, for the audit log),
-- then the messages for the caller's waiters (m, then m messages). (tail.rs
-- decodes it.)
--
-- A change event is one JSON object on the events channel (ARGV[1],
-- state.lua), published only while someone listens: {"event", "kind",
-- "name", "owner"?, "fencing_token"?, "holders", "waiting"}, never a lease
-- id. (The service's engine/events parses it.)

-- Tells `instance` about one of its waiters: the caller in its reply, any
-- other on the name's channel.
local function tell(instance, message)
  if instance == ME then
    if MESSAGES == EMPTY then
      MESSAGES = {}
    end
    MESSAGES[#MESSAGES + 1] = message
  else
    redis.call(NAME_PUBLISH, NAME_CHANNEL, message)
  end
end

-- Tells every instance with waiters on the name that a lease now ends in
-- `expires_in` (ms): they wake the line then.
local function tell_ends_sooner(expires_in)
  redis.call(NAME_PUBLISH, NAME_CHANNEL, 'x ' .. num(expires_in))
end

-- Tells the holders' streams on the name `message` (see above), while
-- someone follows a lease of it.
local function tell_followers(message)
  if FOLLOWED then
    context()
    redis.call(NAME_PUBLISH, NAME_CHANNEL, message)
  end
end

-- One JSON change event on the events channel, while anyone listens; lease
-- ids never appear. It shows `held` live leases, or as many as there are.
local function event(what, owner, token, held)
  if EVENTS == '' then
    return
  end
  context()
  local json = '{"event":"' .. what .. '","kind":"' .. KIND .. '","name":' .. cjson.encode(NAME)
  if owner and owner ~= '' then
    json = json .. ',"owner":' .. cjson.encode(owner)
  end
  if token then
    json = json .. ',"fencing_token":' .. num(token)
  end
  json = json .. ',"holders":' .. num(held or holders())
  redis.call('PUBLISH', EVENTS, json .. ',"waiting":' .. num(waiting()) .. '}')
end

-- A lease (a table as parse_lease() makes) that expired before anyone
-- released it: for the audit log (in the reply's tail), the events and the
-- history.
local function note_expired(lease)
  local owner, token = lease.owner, lease.token
  remember(lease, 'expired', lease.expires_at)
  if NOTICED == EMPTY then
    NOTICED = {}
  end
  NOTICED[#NOTICED + 1] = owner
  NOTICED[#NOTICED + 1] = token
  event('expired', owner, token)
end

-- `reply` with what the caller must hear besides it (see above), after
-- save().
local function finish(reply)
  save()
  local n = #reply
  if NOTICED == EMPTY and MESSAGES == EMPTY then
    reply[n + 1], reply[n + 2] = 0, 0
    return reply
  end
  reply[n + 1] = #NOTICED / 2
  for _, v in ipairs(NOTICED) do
    reply[#reply + 1] = v
  end
  reply[#reply + 1] = #MESSAGES
  for _, m in ipairs(MESSAGES) do
    reply[#reply + 1] = m
  end
  return reply
end
