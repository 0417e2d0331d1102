"""Taking what a run needs to start, in one Redis round trip (F-23, F-28,
F-29, F-31, F-34; the rules are runs/core/start.py's steps 1 to 5).

A worker that claimed a run calls `acquire_start`. One Lua script checks,
in order: the queue's pause and maintenance mode (unless the job's target
is on the maintenance allow-list), the run's cancel marker, then takes a
slot of the job's lock (``<prefix>:lock:job:<id>[:<n>]``, SET NX PX, as
runs/locks.py describes) and the slots of `compute_slots`:

* ``<prefix>:slots:group:<group id>``: the runs of one concurrency group;
* ``<prefix>:slots:grouped``: the runs of every group (what an exclusive
  job waits to see empty);
* ``<prefix>:slots:exclusive``: the exclusive run, or the one waiting for
  the groups to drain (its reservation bars new grouped starts, so it
  cannot starve);
* ``<prefix>:slots:running``: every run, while TAKT_MAX_CONCURRENCY is set.

Each is a sorted set: member the run's lock token (``run-<id>:<random>``),
score its expiry in milliseconds of Redis's own clock (TIME), so machines'
clocks never matter. The run's LockKeeper renews the scores with the lock
(every third of TAKT_LOCK_TTL_SECONDS); its end removes them in the round
trip that releases the lock (runs/metrics.py). A dead worker's members
lapse after the TTL and are pruned by the next script that looks, exactly
as its lock lapses.

When a slot is missing the script takes nothing (it gives the job's lock
back) and says what the run waits for and who holds it; the worker puts
the run back as held, `waiting_for` that slot (runs/overlap.py). Runs that
wait are sent again in priority order by `reserve_for_waiting`, called
after every run's end that frees a slot and from every beat tick: for each
waiter, oldest priority first, it reserves the slots the run needs under
``res:<run id>`` (a member that lapses like any other); the run's worker
then finds its reservation and turns it into its own token. So a run that
waited first starts first, and a slot that frees never goes to a newcomer
ahead of a run that waited for it.

The start's decision-log entry (F-65 `start`) is written by the same
script when the run starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from runs.core.start import SlotNeeds, Wait
from runs.decisions import Decision, decision_fields, decision_key, log_size
from runs.locks import JobLock, cancel_key, get_redis, job_lock, token_run_id

# What acquire_start returns besides a started run.
PAUSED = "paused"
MAINTENANCE = "maintenance"
CANCELLED_RUN = "cancelled"
BUSY = "busy"  # every slot of the job's lock is taken

# KEYS: pause, maintenance, cancel marker, group set, grouped set, exclusive
# set, running set, decision stream, the job's fencing counter, then the
# job's lock slots (none when the caller holds the lock already). ARGV: token, TTL (ms), "1" if allowed
# while paused or in maintenance, number of lock slots, group limit (0: no
# group), "1" if exclusive, global limit (0: none), the run's reservation
# member, the stream's length ("": no entry), the entry's fields.
# Returns {code, detail}: 1 started (the lock slot), 0 the job's lock is
# taken, -1 paused, -2 maintenance, -3 cancelled, -4 its group is full,
# -5 another exclusive run, -6 exclusive waits for the groups (reserved),
# -7 a group waits for an exclusive run, -8 the global limit; detail: a
# member holding what it waits for. A start also returns the run's fencing
# token: the job's counter, one more than the last or Redis's TIME in
# microseconds if that is more (so it still grows after Redis lost it, or
# after the counter of a job that did not start for 7 days expired).
_ACQUIRE = """
local token, ttl, allowed = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local nslots, glimit, excl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local gmax, res = tonumber(ARGV[7]), ARGV[8]
if allowed ~= '1' and redis.call('exists', KEYS[1]) == 1 then return {-1, ''} end
if allowed ~= '1' and redis.call('exists', KEYS[2]) == 1 then return {-2, ''} end
if redis.call('exists', KEYS[3]) == 1 then return {-3, ''} end
local slot = -1
if nslots > 0 then
  for i = 1, nslots do
    if redis.call('set', KEYS[9 + i], token, 'NX', 'PX', ttl) then
      slot = i - 1
      break
    end
  end
  if slot < 0 then return {0, ''} end
end
local function fail(code, holder)
  if slot >= 0 then redis.call('del', KEYS[10 + slot]) end
  return {code, holder}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + ttl
local function others(key)
  redis.call('zremrangebyscore', key, '-inf', now)
  local n = redis.call('zcard', key)
  if redis.call('zscore', key, res) then n = n - 1 end
  return n
end
local function holder(key)
  for _, member in ipairs(redis.call('zrange', key, 0, 1)) do
    if member ~= res then return member end
  end
  return ''
end
if excl then
  if others(KEYS[6]) > 0 then return fail(-5, holder(KEYS[6])) end
  if others(KEYS[5]) > 0 then
    redis.call('zadd', KEYS[6], expiry, res)
    return fail(-6, holder(KEYS[5]))
  end
elseif glimit > 0 then
  if others(KEYS[6]) > 0 then return fail(-7, holder(KEYS[6])) end
  if others(KEYS[4]) >= glimit then return fail(-4, holder(KEYS[4])) end
end
if gmax > 0 and others(KEYS[7]) >= gmax then return fail(-8, holder(KEYS[7])) end
if excl then
  redis.call('zrem', KEYS[6], res)
  redis.call('zadd', KEYS[6], expiry, token)
end
if glimit > 0 then
  redis.call('zrem', KEYS[4], res)
  redis.call('zrem', KEYS[5], res)
  redis.call('zadd', KEYS[4], expiry, token)
  redis.call('zadd', KEYS[5], expiry, token)
end
if gmax > 0 then
  redis.call('zrem', KEYS[7], res)
  redis.call('zadd', KEYS[7], expiry, token)
end
if ARGV[9] ~= '' then
  redis.call('xadd', KEYS[8], 'MAXLEN', '~', ARGV[9], '*', unpack(ARGV, 10))
end
local fence = math.max((tonumber(redis.call('get', KEYS[9])) or 0) + 1,
  tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('set', KEYS[9], string.format('%.0f', fence), 'EX', 604800)
return {1, tostring(slot), string.format('%.0f', fence)}
"""

# KEYS: grouped set, exclusive set, running set, then one group set per
# waiter. ARGV: TTL (ms), global limit (0: none), then per waiter its
# reservation member, group limit (0: none) and "1" if exclusive.
# Returns the (0-based) indexes of the waiters whose slots it reserved.
_RESERVE = """
local ttl, gmax = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + ttl
for i = 1, #KEYS do redis.call('zremrangebyscore', KEYS[i], '-inf', now) end
local granted = {}
for i = 0, #KEYS - 4 do
  local res, glimit, excl = ARGV[3 + 3 * i], tonumber(ARGV[4 + 3 * i]), ARGV[5 + 3 * i] == '1'
  local group = KEYS[4 + i]
  local function others(key)
    local n = redis.call('zcard', key)
    if redis.call('zscore', key, res) then n = n - 1 end
    return n
  end
  local ok = true
  if excl then
    if others(KEYS[2]) > 0 then
      ok = false
    elseif others(KEYS[1]) > 0 then
      redis.call('zadd', KEYS[2], expiry, res)
      ok = false
    end
  elseif glimit > 0 then
    if others(KEYS[2]) > 0 or others(group) >= glimit then ok = false end
  end
  if ok and gmax > 0 and others(KEYS[3]) >= gmax then ok = false end
  if ok then
    if excl then redis.call('zadd', KEYS[2], expiry, res) end
    if glimit > 0 then
      redis.call('zadd', group, expiry, res)
      redis.call('zadd', KEYS[1], expiry, res)
    end
    if gmax > 0 then redis.call('zadd', KEYS[3], expiry, res) end
    table.insert(granted, i)
  end
end
return granted
"""

_WAITS = {
    -4: Wait.GROUP,
    -5: Wait.EXCLUSIVE,
    -6: Wait.EXCLUSIVE,
    -7: Wait.GROUP,
    -8: Wait.LIMIT,
}
_WHY = {
    -4: "its concurrency group is full",
    -5: "another exclusive job runs or waits",
    -6: "an exclusive job waits for every group's runs to end",
    -7: "an exclusive job runs or waits: every group waits",
    -8: "the global limit TAKT_MAX_CONCURRENCY is reached",
}


def _prefix() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:slots"


def fence_key(job_id: int) -> str:
    """The job's fencing counter (see _ACQUIRE)."""
    return f"{settings.TAKT_KEY_PREFIX}:fence:job:{job_id}"


def group_key(group_id: int | None) -> str:
    return f"{_prefix()}:group:{'none' if group_id is None else group_id}"


def grouped_key() -> str:
    return f"{_prefix()}:grouped"


def exclusive_key() -> str:
    return f"{_prefix()}:exclusive"


def running_key() -> str:
    return f"{_prefix()}:running"


def reservation(run_id: int | None) -> str:
    return f"res:{'none' if run_id is None else run_id}"


def member_run_id(member: bytes | str | None) -> int | None:
    """The run a slot member names: a lock token or a reservation."""
    text = member.decode() if isinstance(member, bytes) else (member or "")
    if text.startswith("res:"):
        tail = text[len("res:") :]
        return int(tail) if tail.isdigit() else None
    return token_run_id(text)


def global_limit() -> int | None:
    limit = getattr(settings, "TAKT_MAX_CONCURRENCY", None)
    return int(limit) if limit else None


def members_for(needs: SlotNeeds) -> tuple[str, ...]:
    """The slot sets a run with these needs is a member of once it started."""
    keys: list[str] = []
    if needs.exclusive:
        keys.append(exclusive_key())
    elif needs.group is not None:
        keys += [group_key(needs.group), grouped_key()]
    if needs.global_limit is not None:
        keys.append(running_key())
    return tuple(keys)


@dataclass(frozen=True)
class Waiting:
    """A start that must wait for a slot: what for, why, and a run holding it."""

    wait: Wait
    reason: str
    holder: int | None = None
    reserved_exclusive: bool = False


def acquire_start(
    job_id: int,
    *,
    run_id: int,
    slots: int = 1,
    allowed: bool = False,
    needs: SlotNeeds | None = None,
    start: Decision | None = None,
    lock: JobLock | None = None,
) -> tuple[JobLock, bool | str | Waiting]:
    """Take the job's lock (slots 0 … slots-1) and the slots of `needs`, in
    one round trip. Returns the lock (its `members` set to the slot sets it
    joined, its `fence` to the run's fencing token) and True when the run
    may start; else the lock (not taken) and
    PAUSED, MAINTENANCE, CANCELLED_RUN, BUSY (the job's lock is taken), or
    a `Waiting` (the lock was given back). With `lock` (held already, after
    a take-over) only the slots are taken. `start` is written to the
    decision log when the run starts. Raises redis.RedisError."""
    needs = needs or SlotNeeds()
    slot_locks = (
        []
        if lock is not None
        else [job_lock(job_id, slot=s, run_id=run_id) for s in range(max(slots, 1))]
    )
    first = lock or slot_locks[0]
    queue = f"{settings.TAKT_KEY_PREFIX}:queue"
    keys = [
        f"{queue}:paused",
        f"{queue}:maintenance",
        cancel_key(run_id),
        group_key(needs.group),
        grouped_key(),
        exclusive_key(),
        running_key(),
        decision_key(),
        fence_key(job_id),
        *(s.key for s in slot_locks),
    ]
    fields: list[str] = []
    if start is not None:
        fields = [part for pair in decision_fields(start).items() for part in pair]
    args = [
        first.token,
        first.ttl_ms,
        "1" if allowed else "0",
        len(slot_locks),
        needs.group_limit if needs.group is not None and not needs.exclusive else 0,
        "1" if needs.exclusive else "0",
        needs.global_limit or 0,
        reservation(run_id),
        str(log_size()) if start is not None else "",
        *fields,
    ]
    reply = first.client.eval(_ACQUIRE, len(keys), *keys, *args)
    code, detail = int(reply[0]), reply[1]
    if code == 1:
        taken = first if lock is not None else slot_locks[int(detail)]
        taken.members = members_for(needs)
        taken.fence = int(reply[2])
        return taken, True
    if code in _WAITS:
        holder = member_run_id(detail)
        return first, Waiting(_WAITS[code], _WHY[code], holder, reserved_exclusive=code == -6)
    return first, {0: BUSY, -1: PAUSED, -2: MAINTENANCE, -3: CANCELLED_RUN}[code]


@dataclass(frozen=True)
class Waiter:
    run_id: int
    needs: SlotNeeds


def reserve_for_waiting(waiters: Sequence[Waiter]) -> list[int]:
    """Reserve the slots of the waiters that can start now, in the order
    given (priority, then age); an exclusive waiter whose groups still run
    renews its reservation instead. Returns the ids of the runs it reserved
    for: send them. One round trip; raises redis.RedisError."""
    if not waiters:
        return []
    ttl_ms = int(settings.TAKT_LOCK_TTL_SECONDS * 1000)
    limit = next((w.needs.global_limit for w in waiters if w.needs.global_limit), None) or 0
    keys = [
        grouped_key(),
        exclusive_key(),
        running_key(),
        *(group_key(w.needs.group) for w in waiters),
    ]
    args: list[object] = [ttl_ms, limit]
    for waiter in waiters:
        grouped = waiter.needs.group is not None and not waiter.needs.exclusive
        args += [
            reservation(waiter.run_id),
            waiter.needs.group_limit if grouped else 0,
            "1" if waiter.needs.exclusive else "0",
        ]
    granted = get_redis().eval(_RESERVE, len(keys), *keys, *args)
    return [waiters[int(i)].run_id for i in granted]


def slot_holders(key: str) -> list[tuple[int | None, bool]]:
    """The runs holding (or reserved) a slot set now: (run id, reserved)."""
    client = get_redis()
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    members = client.zrangebyscore(key, now_ms, "+inf")
    out = []
    for member in members:
        text = member.decode() if isinstance(member, bytes) else member
        out.append((member_run_id(text), text.startswith("res:")))
    return out


def leave_slots(lock: JobLock) -> None:
    """Give back the slots `lock` holds (its group's, the exclusive one, the
    global limit's) and keep the job's lock itself: a detached command's
    run once its program runs (runs/detached.py). One round trip."""
    if not lock.members:
        return
    pipe = lock.client.pipeline(transaction=False)
    for key in lock.members:
        pipe.zrem(key, lock.token)
    pipe.execute()
    lock.members = ()
