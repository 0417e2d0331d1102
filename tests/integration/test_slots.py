"""Concurrency slots in Redis (F-31, F-34; runs/slots.py) against the
private Redis: the Lua script answers as runs/core/start.py's
`compute_slots` does, row by row of its table; slots lapse with their
holder; reservations go to the waiting runs in priority order; two
claimers at once get one slot."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings

from runs.core.start import SlotFacts, SlotNeeds, Wait, compute_slots
from runs.locks import job_lock
from runs.slots import (
    Waiter,
    Waiting,
    acquire_start,
    exclusive_key,
    fence_key,
    group_key,
    grouped_key,
    reservation,
    reserve_for_waiting,
    running_key,
    slot_holders,
)
from tests.unit.test_start_decision import SLOT_TABLE

RUN = 1000  # the run that starts; others are 1, 2, 3 …


def redis_now_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def occupy(client, needs: SlotNeeds, facts: SlotFacts, *, ttl_ms: int = 60_000) -> None:
    """Other runs' members in the sets, as the facts say."""
    expiry = redis_now_ms(client) + ttl_ms
    other = iter(range(1, 100))
    group = needs.group if needs.group is not None else 7
    for _ in range(facts.group):
        member = f"run-{next(other)}:x"
        client.zadd(group_key(group), {member: expiry})
        client.zadd(grouped_key(), {member: expiry})
    for _ in range(facts.grouped - facts.group):
        member = f"run-{next(other)}:x"
        client.zadd(group_key(99), {member: expiry})
        client.zadd(grouped_key(), {member: expiry})
    for _ in range(facts.exclusive):
        client.zadd(exclusive_key(), {f"run-{next(other)}:x": expiry})
    for _ in range(facts.running):
        client.zadd(running_key(), {f"run-{next(other)}:x": expiry})


@pytest.mark.parametrize(("needs", "facts", "wait", "reserve"), SLOT_TABLE)
def test_the_script_decides_as_the_pure_core(redis_client, needs, facts, wait, reserve):
    occupy(redis_client, needs, facts)
    assert compute_slots(needs, facts).wait == wait  # the row itself

    lock, acquired = acquire_start(42, run_id=RUN, needs=needs)

    if wait is None:
        assert acquired is True
        assert lock.holder() == lock.token  # the job's lock is taken
        for key in lock.members:
            assert redis_client.zscore(key, lock.token) is not None
    else:
        assert isinstance(acquired, Waiting) and acquired.wait == wait
        assert lock.holder() is None  # the job's lock was given back
        assert acquired.holder is not None  # a run that holds what it waits for
        reserved = redis_client.zscore(exclusive_key(), reservation(RUN)) is not None
        assert reserved == reserve


def test_the_slots_go_with_the_lock_renewed_and_released(redis_client):
    needs = SlotNeeds(group=3, group_limit=1, global_limit=5)
    lock, acquired = acquire_start(42, run_id=RUN, needs=needs)
    assert acquired is True
    assert set(lock.members) == {group_key(3), grouped_key(), running_key()}
    before = redis_client.zscore(group_key(3), lock.token)
    time.sleep(0.01)
    assert lock.renew()
    assert redis_client.zscore(group_key(3), lock.token) > before

    assert lock.release()
    for key in (group_key(3), grouped_key(), running_key()):
        assert redis_client.zcard(key) == 0


def test_a_dead_runs_slot_lapses_after_its_ttl(redis_client, settings):
    """A worker killed while holding a group slot renews nothing: the
    member's expiry passes and the next look prunes it."""
    settings.TAKT_LOCK_TTL_SECONDS = 3
    needs = SlotNeeds(group=3, group_limit=1)
    dead = job_lock(41, run_id=1, ttl_s=0.3)
    assert acquire_start(41, run_id=1, needs=needs, lock=dead)[1] is True
    assert isinstance(acquire_start(42, run_id=2, needs=needs)[1], Waiting)

    time.sleep(0.35)

    lock, acquired = acquire_start(42, run_id=2, needs=needs)
    assert acquired is True
    assert [run for run, _ in slot_holders(group_key(3))] == [2]


def test_waiting_runs_get_their_slots_in_the_order_given(redis_client):
    group = SlotNeeds(group=3, group_limit=1)
    holder, _ = acquire_start(41, run_id=1, needs=group)
    waiters = [Waiter(5, group), Waiter(6, group), Waiter(7, SlotNeeds(group=4, group_limit=1))]

    assert reserve_for_waiting(waiters) == [7]  # group 3 is full, group 4 free

    holder.release()  # 7 was sent: it waits no more
    assert reserve_for_waiting(waiters[:2]) == [5]  # the first in line, not 6
    # 5's worker turns its reservation into its own slot
    lock, acquired = acquire_start(43, run_id=5, needs=group)
    assert acquired is True
    assert [(run, reserved) for run, reserved in slot_holders(group_key(3))] == [(5, False)]
    # a newcomer does not overtake 6 while 5 runs …
    assert isinstance(acquire_start(44, run_id=8, needs=group)[1], Waiting)


def test_an_exclusive_run_waiting_for_the_groups_bars_new_grouped_starts(redis_client):
    grouped = SlotNeeds(group=3, group_limit=5)
    exclusive = SlotNeeds(exclusive=True)
    first, _ = acquire_start(41, run_id=1, needs=grouped)

    waiting = acquire_start(50, run_id=9, needs=exclusive)[1]
    assert isinstance(waiting, Waiting) and waiting.reserved_exclusive
    # the group has room, but the exclusive run is next
    assert isinstance(acquire_start(42, run_id=2, needs=grouped)[1], Waiting)
    assert reserve_for_waiting([Waiter(9, exclusive)]) == []  # still a grouped run

    first.release()
    assert reserve_for_waiting([Waiter(9, exclusive)]) == [9]
    lock, acquired = acquire_start(50, run_id=9, needs=exclusive)
    assert acquired is True
    assert isinstance(acquire_start(42, run_id=2, needs=grouped)[1], Waiting)
    lock.release()
    assert acquire_start(42, run_id=2, needs=grouped)[1] is True


def test_two_claimers_at_once_get_one_slot_of_a_group(redis_client):
    """Two workers, two jobs of one group (limit 1), the same instant."""
    needs = SlotNeeds(group=3, group_limit=1)
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def claim(i: int) -> None:
        barrier.wait(timeout=10)
        results[i] = acquire_start(60 + i, run_id=70 + i, needs=needs)[1]

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(type(r).__name__ for r in results) == ["Waiting", "bool"]
    assert len(slot_holders(group_key(3))) == 1
    assert settings.TAKT_KEY_PREFIX in group_key(3)
    assert Wait.GROUP in [r.wait for r in results if isinstance(r, Waiting)]


# --- the fencing token (F-113) --------------------------------------------------


def test_each_start_of_a_job_gets_a_larger_fencing_token_even_after_redis_lost_them(
    redis_client,
):
    fences = []
    for run_id in (1, 2, 3):
        lock, acquired = acquire_start(7, run_id=run_id)
        assert acquired is True
        fences.append(lock.fence)
        assert lock.release()
    other_job, _ = acquire_start(8, run_id=4)  # a job of its own: its own counter

    assert fences[0] < fences[1] < fences[2]
    assert 0 < redis_client.ttl(fence_key(7)) <= 7 * 24 * 3600  # a deleted job's goes away
    assert fences[0] >= redis_now_ms(redis_client) * 1000 - 60_000_000  # Redis's µs, or more
    redis_client.flushdb()  # a restart without persistence: the counter is gone
    lock, _ = acquire_start(7, run_id=5)
    assert lock.fence > fences[2]
    assert other_job.fence is not None


def test_a_start_that_does_not_get_the_lock_moves_no_fencing_token(redis_client):
    held, _ = acquire_start(7, run_id=1)
    refused, acquired = acquire_start(7, run_id=2)

    assert acquired == "busy" and refused.fence is None
    assert redis_client.get(fence_key(7)) == str(held.fence).encode()  # it took no number
    assert held.release()
    assert acquire_start(7, run_id=3)[0].fence > held.fence
