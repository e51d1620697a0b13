-- append.lua writes one message to its lane's stream, and its note to the
-- endpoint's index stream, atomically: the lane rule (transport.Decide) is
-- evaluated by the server, so the usual write is one round trip.
--
-- KEYS[1] the lane's stream {prefix}:<correlation_id>
-- KEYS[2] the endpoint's index stream {prefix}
-- ARGV[1] the entry ID, <sequence>-0
-- ARGV[2] the endpoint id, ARGV[3] the event id (webhook-id)
-- ARGV[4] the correlation id, ARGV[5] the sequence
-- ARGV[6] the index's approximate MAXLEN
-- ARGV[7..] the entry's field/value pairs
--
-- Returns {1, id} when written; {2} when the index stream is missing
-- (nothing written); an error when a key is not a stream; and
-- {0, id, webhook-id, endpoint-id} when the lane refuses the write, naming
-- the entry that stands in the way: a tail written by another endpoint,
-- or the entry at this ID, or (webhook-id and endpoint-id empty) only the
-- lane's last-generated-id when no entry is there.

-- The index is the user's: it exists once they made it (with their
-- consumer group). Its absence means the wrong server or database, or
-- a server that lost its data: nothing is written until it is back. A
-- key of another type is refused here, before the lane is written, since
-- a script's writes are not undone when a later command fails.
local kind = redis.call('TYPE', KEYS[2]).ok
if kind == 'none' then
  return {2}
elseif kind ~= 'stream' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' is a ' .. kind .. ', not a stream')
end

local function field(entry, name)
  local f = entry[2]
  for i = 1, #f, 2 do
    if f[i] == name then
      return f[i + 1]
    end
  end
  return ''
end

-- A lane whose last entry is another endpoint's (or no endpoint's) is
-- shared by mistake: writing after it would interleave two orders.
local tail = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if tail and field(tail, 'hookflow-endpoint-id') ~= ARGV[2] then
  return {0, tail[1], field(tail, 'webhook-id'), field(tail, 'hookflow-endpoint-id')}
end

-- XADD refuses an ID at or below the stream's last_id, which XDEL and
-- XTRIM keep: in a stream per lane that is exactly a duplicate or an
-- event written after its successor.
local added = redis.pcall('XADD', KEYS[1], ARGV[1], unpack(ARGV, 7))
if type(added) == 'table' and added.err then
  if not string.find(added.err, 'equal or smaller', 1, true) then
    return redis.error_reply(added.err)
  end
  local at = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
  if at then
    return {0, at[1], field(at, 'webhook-id'), field(at, 'hookflow-endpoint-id')}
  end
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      return {0, info[i + 1], '', ''}
    end
  end
  return redis.error_reply('ERR XINFO STREAM has no last-generated-id')
end

redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*',
  'lane', ARGV[4], 'sequence', ARGV[5], 'webhook-id', ARGV[3], 'hookflow-endpoint-id', ARGV[2])
return {1, added}
