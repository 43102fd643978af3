package redis

import (
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// syncScript is one fleet breaker; see Store. KEYS[1] is its hash. ARGV:
// 1 generation, 2 failures, 3 claim (0 or 1), 4 probe successes, 5 probe
// failures, 6 probe releases, 7 failure ratio, 8 min requests, 9 window
// ms, 10 open ms, 11 probes, 12 the hash's TTL in ms while open or
// half-open, 13 its TTL in ms while closed, then pairs: how many slices
// of the window ago, and the successes of that slice. It returns {state (0
// closed, 1 half-open, 2 open), generation, ms left open, claim granted (0
// or 1), Redis's time in ms}. Whatever it is sent, it costs one read and
// at most one write of the hash, and a PEXPIRE.
//
// A state it did not write (a time further ahead than the hash lives, a
// number that is not finite or out of range) is an error, not a state: the
// process's own breaker stands in until the key is fixed or expires.
var syncScript = goredis.NewScript(`
local k = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[12])
local N = 10
local slice = math.max(math.floor(tonumber(ARGV[9]) / N), 1)
local e = math.floor(now / slice)
local fields = {'st', 'gen', 'until', 'claimed', 'ok'}
for j = 0, N - 1 do
	fields[#fields + 1] = 'e' .. j
	fields[#fields + 1] = 's' .. j
	fields[#fields + 1] = 'f' .. j
end
local h = redis.call('HMGET', k, unpack(fields))
local function num(name, v, lo, hi)
	local x = tonumber(v)
	if not x or x ~= x or x < lo or x > hi or (name ~= 'until' and x ~= math.floor(x)) then
		error({err = 'retry: breaker state out of range: ' .. name .. ' = ' .. tostring(v)})
	end
	return x
end
local st, gen, untl, claimed, ok = 0, nil, 0, 0, 0
if h[2] then
	st = num('st', h[1] or 0, 0, 2)
	gen = num('gen', h[2], 0, 2^53)
	untl = num('until', h[3] or 0, 0, now + ttl)
	claimed = num('claimed', h[4] or 0, 0, 2^31)
	ok = num('ok', h[5] or 0, 0, 2^31)
end
local E, S, F = {}, {}, {}
for j = 0, N - 1 do
	if h[6 + 3 * j] then E[j] = num('e' .. j, h[6 + 3 * j], 0, 2^53) end
	S[j] = num('s' .. j, h[7 + 3 * j] or 0, 0, 2^53)
	F[j] = num('f' .. j, h[8 + 3 * j] or 0, 0, 2^53)
end
local dirty = false
local g = tonumber(ARGV[1]) or -1
if not gen then
	-- A new breaker, or one whose state Redis lost: its generations start
	-- at the time in microseconds (exact below 2^53), past those of any
	-- state lost before, which changes far less often than once a
	-- microsecond. The counts sent count in it, whatever generation the
	-- process had: they are of the closed state, which it is.
	gen = tonumber(t[1]) * 1000000 + tonumber(t[2])
	g = gen
	dirty = true
end
-- A process that has never synced (generation 0) counts in the current
-- generation.
if g == 0 then g = gen end
local ratio = tonumber(ARGV[7]) or 1
local minreq = tonumber(ARGV[8]) or 1
local openms = tonumber(ARGV[10]) or 30000
local probes = tonumber(ARGV[11]) or 1
local set, cleared = {}, false
local function clear()
	set, cleared = {}, true
	for j = 0, N - 1 do E[j] = nil; S[j] = 0; F[j] = 0 end
end
local function open()
	st = 2; gen = gen + 1; untl = now + openms; claimed = 0; ok = 0; dirty = true
	clear()
end
-- add counts s and f to the slice ago slices back, unless a later slice
-- holds its place in the ring.
local function add(ago, s, f)
	if ago < 0 or ago >= N or s + f <= 0 then return end
	local ej = e - ago
	local j = ej % N
	if E[j] == ej then
		S[j] = S[j] + s; F[j] = F[j] + f
	elseif not E[j] or E[j] < ej then
		E[j] = ej; S[j] = s; F[j] = f
	else
		return
	end
	set[#set + 1] = 'e' .. j; set[#set + 1] = ej
	set[#set + 1] = 's' .. j; set[#set + 1] = S[j]
	set[#set + 1] = 'f' .. j; set[#set + 1] = F[j]
end
if st == 2 and now >= untl then
	st = 1; gen = gen + 1; claimed = 0; ok = 0; dirty = true
end
if st == 1 and now >= untl + openms then
	gen = gen + 1; claimed = 0; ok = 0; untl = now; dirty = true
end
if g == gen then
	if st == 0 then
		local fc = tonumber(ARGV[2]) or 0
		for j = 14, #ARGV, 2 do add(tonumber(ARGV[j]) or -1, tonumber(ARGV[j + 1]) or 0, 0) end
		add(0, 0, fc)
		-- Successes alone cannot trip it.
		if fc > 0 then
			local n, f = 0, 0
			for j = 0, N - 1 do
				if E[j] and E[j] > e - N then
					n = n + S[j] + F[j]
					f = f + F[j]
				end
			end
			if n > 0 and n >= minreq and f >= ratio * n then open() end
		end
	elseif st == 1 then
		if (tonumber(ARGV[5]) or 0) > 0 then
			open()
		else
			local rel = tonumber(ARGV[6]) or 0
			local succ = tonumber(ARGV[4]) or 0
			if rel > 0 then claimed = math.max(claimed - rel, 0); dirty = true end
			if succ > 0 then ok = ok + succ; dirty = true end
			if ok >= probes then
				st = 0; gen = gen + 1; claimed = 0; ok = 0
				clear()
			end
		end
	end
end
local granted = 0
if ARGV[3] == '1' and st == 1 and claimed < probes then
	claimed = claimed + 1; granted = 1; dirty = true
end
if cleared then
	local ring = {}
	for j = 0, N - 1 do
		ring[#ring + 1] = 'e' .. j; ring[#ring + 1] = 's' .. j; ring[#ring + 1] = 'f' .. j
	end
	redis.call('HDEL', k, unpack(ring))
end
if dirty then
	for _, v in ipairs({'st', st, 'gen', gen, 'until', untl, 'claimed', claimed, 'ok', ok}) do set[#set + 1] = v end
end
if #set > 0 then redis.call('HSET', k, unpack(set)) end
if st == 0 then
	redis.call('PEXPIRE', k, ARGV[13])
else
	redis.call('PEXPIRE', k, ttl)
end
local left = 0
if st == 2 then left = untl - now end
return {st, gen, left, granted, now}`)

// syncReply is syncScript's reply, checked.
type syncReply struct {
	state   int // 0 closed, 1 half-open, 2 open
	gen     uint64
	leftMs  int64 // while open: ms left
	granted bool
	nowMs   int64 // Redis's time
}

// parseSyncReply checks a reply of syncScript: a state it names, a
// generation and a time that are Redis's, and an open time no longer than
// the state lives (maxLeftMs).
func parseSyncReply(v []int64, maxLeftMs int64) (syncReply, error) {
	if len(v) != 5 || v[0] < 0 || v[0] > 2 || v[1] < 0 || v[1] > 1<<53 || v[2] < 0 || v[2] > maxLeftMs || v[3] < 0 || v[3] > 1 || v[4] <= 0 {
		return syncReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	return syncReply{state: int(v[0]), gen: uint64(v[1]), leftMs: v[2], granted: v[3] == 1, nowMs: v[4]}, nil
}

// The fleet's list of breakers that are not quiet: every breaker of a
// prefix that is open or half-open, or closed with failures within its
// window, in one hash, PREFIX{breakers}, a field a breaker, and a sorted
// set of the same names by the time each entry lapses,
// PREFIX{breakers}:lapse. Each process reads the hash once an interval
// while it has calls (feedRead), and learns from it at once what changed
// in the fleet; a breaker it does not list is closed and quiet. An entry
// is "GEN STATE UNTIL LAPSE": the generation, the state (0 closed, 1
// half-open, 2 open), while open the time it opened until, and the time
// the entry lapses, in ms of Redis's clock.

// feedRead returns {Redis's time in ms, HGETALL of KEYS[1]}.
var feedRead = goredis.NewScript(`
local t = redis.call('TIME')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('HGETALL', KEYS[1])}`)

// feedWrite sets entries of the list KEYS[1] (lapse times in KEYS[2]):
// ARGV[1] is the TTL of both in ms, then each entry is five arguments:
// name, generation, state, until, lapse. An entry replaces one of the same
// or an older generation, keeping the later lapse of the same one. It then
// drops up to 32 entries whose time has passed. It returns nothing.
var feedWrite = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for j = 2, #ARGV, 5 do
	local name, gen, lapse = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 4])
	local cur = redis.call('HGET', KEYS[1], name)
	local cg, cl = -1, 0
	if cur then
		local a, b = string.match(cur, '^(%d+) %d+ %d+ (%d+)$')
		cg, cl = tonumber(a) or -1, tonumber(b) or 0
	end
	if gen > cg or (gen == cg and lapse > cl) then
		redis.call('HSET', KEYS[1], name, ARGV[j + 1] .. ' ' .. ARGV[j + 2] .. ' ' .. ARGV[j + 3] .. ' ' .. ARGV[j + 4])
		redis.call('ZADD', KEYS[2], lapse, name)
	end
end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 32)
if #old > 0 then
	redis.call('HDEL', KEYS[1], unpack(old))
	redis.call('ZREM', KEYS[2], unpack(old))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 0`)

// feedEntry is one breaker of the list.
type feedEntry struct {
	gen            uint64
	state          int
	untilMs, lapse int64
}

// parseFeedEntry checks an entry of the list at Redis's time nowMs: four
// whole numbers, a state it names, times no further ahead than the
// entry may live (maxMs).
func parseFeedEntry(s string, nowMs, maxMs int64) (feedEntry, error) {
	f := strings.Fields(s)
	bad := fmt.Errorf("entry %q out of range", s)
	if len(f) != 4 || len(s) > 80 {
		return feedEntry{}, bad
	}
	var n [4]int64
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil || v < 0 {
			return feedEntry{}, bad
		}
		n[i] = v
	}
	if n[0] > 1<<53 || n[1] > 2 || n[2] > nowMs+maxMs || n[3] > nowMs+maxMs {
		return feedEntry{}, bad
	}
	return feedEntry{gen: uint64(n[0]), state: int(n[1]), untilMs: n[2], lapse: n[3]}, nil
}
