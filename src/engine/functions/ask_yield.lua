-- Ask every holder of a name to finish early (core/state.lua: KEYS,
-- ARGV[1..2]); takes nothing from anyone.
--
-- ARGV[3]  who asks: the asking request's owner ("" none)
-- ARGV[4]  why: its reason ("" none)
--
-- While the name is held, tells the holders' streams "y WAITING\nBY\nREASON"
-- (while someone follows a lease of it: core/messages.lua), and publishes a
-- "yield-requested" change event (while anyone listens) with "by" and
-- "reason" beside the usual fields.
--
-- Replies
--   {holders}   how many live leases were asked (0: none holds it; nothing told)
read_state()
local held = holders()
if held == 0 then
  return {0}
end
local by, reason = ARGV[3], ARGV[4]
local queued = waiting()
tell_followers('y ' .. num(queued) .. '\n' .. by .. '\n' .. reason)
if EVENTS ~= '' then
  local json = '{"event":"yield-requested","kind":"' .. KIND .. '","name":' .. cjson.encode(NAME)
  if by ~= '' then
    json = json .. ',"by":' .. cjson.encode(by)
  end
  if reason ~= '' then
    json = json .. ',"reason":' .. cjson.encode(reason)
  end
  redis.call('PUBLISH', EVENTS, json .. ',"holders":' .. num(held) .. ',"waiting":' .. num(queued) .. '}')
end
return {held}
