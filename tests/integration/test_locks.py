"""Per-job locks in the private Redis (F-82): one owner at a time, renewal
and release only by the owner's token, and a lapsed lock can be taken over."""

from __future__ import annotations

import time

import pytest

from runs.locks import JobLock, LockKeeper, job_lock, job_lock_key


def wait_for(predicate, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_lock_key_carries_the_prefix_and_the_job_id(settings):
    assert job_lock_key(42) == f"{settings.TAKT_KEY_PREFIX}:lock:job:42"
    assert job_lock(42).ttl_ms == settings.TAKT_LOCK_TTL_SECONDS * 1000


def test_a_second_owner_cannot_acquire_a_held_lock(redis_client):
    first, second = job_lock(1), job_lock(1)

    assert first.acquire() is True
    assert second.acquire() is False

    assert redis_client.get(job_lock_key(1)) == first.token.encode()
    assert first.holder() == second.holder() == first.token
    assert 0 < redis_client.pttl(job_lock_key(1)) <= first.ttl_ms
    assert job_lock(2).acquire() is True  # other jobs are not affected


def test_release_by_another_token_leaves_the_lock_alone(redis_client):
    owner, stranger = job_lock(1), job_lock(1)
    owner.acquire()

    assert stranger.release() is False
    assert stranger.renew() is False

    assert redis_client.get(job_lock_key(1)) == owner.token.encode()
    assert owner.release() is True
    assert redis_client.exists(job_lock_key(1)) == 0
    assert owner.release() is False  # a second release is harmless


def test_renew_extends_the_lease_to_the_full_ttl(redis_client):
    lock = job_lock(1, ttl_s=2)
    lock.acquire()
    redis_client.pexpire(job_lock_key(1), 100)  # as if 1.9 s had passed

    assert lock.renew() is True

    assert 1900 < redis_client.pttl(job_lock_key(1)) <= 2000


def test_a_keeper_holds_a_short_lock_beyond_its_ttl_until_stopped(redis_client):
    lock = job_lock(1, ttl_s=0.3)
    assert lock.acquire()
    ticks: list[float] = []
    keeper = LockKeeper(lock, on_tick=lambda: ticks.append(time.monotonic()))
    keeper.start()
    try:
        time.sleep(1.2)  # four lease lengths
        assert lock.holder() == lock.token
        assert redis_client.pttl(job_lock_key(1)) > 0
    finally:
        keeper.stop()
    assert keeper.lost is False
    assert len(ticks) >= 5  # renewed every third of the TTL (0.1 s)
    stopped_at = len(ticks)

    assert lock.release() is True
    assert redis_client.exists(job_lock_key(1)) == 0
    time.sleep(0.3)
    assert len(ticks) == stopped_at  # no renewal after stop()


def test_a_lapsed_lock_goes_to_the_next_owner_and_the_old_one_cannot_touch_it(redis_client):
    old = job_lock(1, ttl_s=0.2)
    assert old.acquire()
    wait_for(lambda: redis_client.exists(job_lock_key(1)) == 0)  # the old owner stalled

    new = job_lock(1, ttl_s=10)
    assert new.acquire() is True

    assert old.renew() is False
    assert old.release() is False
    assert redis_client.get(job_lock_key(1)) == new.token.encode()
    assert redis_client.pttl(job_lock_key(1)) > 9000  # not shortened to the old lease either


def test_a_keeper_whose_lock_was_taken_over_reports_it_lost_and_spares_the_new_owner(redis_client):
    old = job_lock(1, ttl_s=0.3)
    old.acquire()
    keeper = LockKeeper(old)
    keeper.start()
    try:
        # The lease lapsed while Redis was unreachable and a new owner took
        # it (in one step here, so the keeper cannot re-take the gap).
        new = JobLock(key=job_lock_key(1), ttl_ms=10_000)
        redis_client.set(job_lock_key(1), new.token, px=new.ttl_ms)
        wait_for(lambda: keeper.lost)
    finally:
        keeper.stop()

    assert redis_client.get(job_lock_key(1)) == new.token.encode()
    assert redis_client.pttl(job_lock_key(1)) > 9000


@pytest.mark.parametrize("ttl_s", [0.3, 3])
def test_job_lock_uses_milliseconds(ttl_s, redis_client):
    lock = job_lock(7, ttl_s=ttl_s)
    lock.acquire()
    assert 0 < redis_client.pttl(job_lock_key(7)) <= ttl_s * 1000
    lock.release()


def test_a_runs_lock_token_names_the_run():
    from runs.locks import job_lock, token_run_id

    assert token_run_id(job_lock(7, run_id=42).token) == 42
    assert token_run_id(job_lock(7).token) is None
    assert token_run_id(b"run-x:abc") is None and token_run_id(None) is None


# --- locks across a Redis restart or flush ------------------------------------


def test_a_keeper_re_takes_its_lock_after_redis_lost_it(redis_client, caplog):
    lock = job_lock(1, ttl_s=0.6, run_id=42)
    assert lock.acquire()
    keeper = LockKeeper(lock)
    keeper.start()
    try:
        redis_client.flushdb()  # what a restart without persistence leaves
        wait_for(lambda: keeper.retaken == 1)
        assert redis_client.get(job_lock_key(1)) == lock.token.encode()
        assert 0 < redis_client.pttl(job_lock_key(1)) <= 600
        time.sleep(0.5)  # and it goes on renewing the re-taken key
        assert redis_client.get(job_lock_key(1)) == lock.token.encode()
    finally:
        keeper.stop()
    assert (keeper.lost, keeper.retaken) == (False, 1)
    assert f"re-took lock {job_lock_key(1)} after Redis lost it" in caplog.text


def test_a_keeper_whose_lock_expired_does_not_re_take_it(redis_client, caplog):
    # No renewal for longer than the TTL (the worker stalled): the key may
    # have expired normally and the run been called lost; not Redis's loss.
    lock = job_lock(1, ttl_s=0.2)
    keeper = LockKeeper(lock)
    assert lock.acquire()
    keeper.start()
    keeper.stop()  # no renewal from the thread
    wait_for(lambda: redis_client.exists(job_lock_key(1)) == 0)
    time.sleep(0.05)

    keeper.tick()

    assert (keeper.lost, keeper.retaken) == (True, 0)
    assert redis_client.exists(job_lock_key(1)) == 0
    assert "re-took" not in caplog.text


def test_the_cancel_marker_is_seen_before_a_vanished_lock_is_re_taken(redis_client):
    from runs.locks import CANCELLED, cancel_key

    lock = job_lock(1, run_id=42)
    redis_client.set(cancel_key(42), "cancelled")  # and the lock key is gone

    assert lock.renew_unless_cancelled(retake=True) == CANCELLED
    assert redis_client.exists(job_lock_key(1)) == 0


def test_a_renewal_never_re_takes_a_key_held_by_another_token(redis_client):
    from runs.locks import NOT_OURS

    mine, other = job_lock(1, run_id=1), job_lock(1, run_id=2)
    assert other.acquire()

    assert mine.renew_unless_cancelled(retake=True) == NOT_OURS
    assert redis_client.get(job_lock_key(1)) == other.token.encode()


# --- a lost lock after a pause (F-113) ----------------------------------------


class FakeMonotonic:
    """A monotonic clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_keeper_that_wakes_a_ttl_after_its_last_renewal_loses_the_lock_at_once(
    redis_client, caplog
):
    # The worker was paused (SIGSTOP, a GC, a frozen VM) for a whole TTL:
    # the key may have expired and another run taken the job. The first
    # tick after the pause says so before asking Redis, even though the key
    # still holds our token here (the lapse is on the clock alone).
    clock = FakeMonotonic()
    lock = job_lock(1, ttl_s=6, run_id=42)
    assert lock.acquire()
    stops: list[str] = []
    keeper = LockKeeper(
        lock, on_tick=lambda: stops.append("tick"), on_lost=lambda: stops.append("stop") or 0.5,
        clock=clock,
    )  # fmt: skip

    clock.now += 5.999  # just under the TTL: renewed
    assert keeper.tick() == 2.0 and keeper.check() and stops == ["tick"]
    clock.now += 5.999  # counted from that renewal: renewed again
    assert keeper.tick() == 2.0 and stops == ["tick", "tick"]
    renewals = redis_client.pttl(job_lock_key(1))

    clock.now += 6  # exactly the TTL since the last renewal: lost
    assert keeper.tick() == 0.5  # what on_lost asked for

    assert (keeper.lost, keeper.check(), stops) == (True, False, ["tick", "tick", "stop"])
    assert "no renewal for 6.0 s, longer than the lock's TTL of 6 s" in keeper.lost_reason
    assert redis_client.pttl(job_lock_key(1)) <= renewals  # not renewed: it is not ours to keep
    assert caplog.text.count(f"lock {job_lock_key(1)} was lost before the run ended") == 1
    keeper.tick()  # on_lost again, as often as it asks; no renewal, no second log line
    assert stops[-1] == "stop" and caplog.text.count("was lost before the run ended") == 1


def test_the_jobs_own_thread_sees_the_lapse_before_the_renewer_does():
    # No Redis needed: the clock alone says the lock is gone.
    clock = FakeMonotonic()
    keeper = LockKeeper(JobLock(key="k", ttl_ms=3000, client=None), clock=clock)  # type: ignore[arg-type]
    clock.now += 2.9
    assert keeper.check() is True
    clock.now += 0.1
    assert keeper.check() is False and keeper.lost


def test_a_keeper_whose_lock_another_run_took_calls_on_lost(redis_client):
    lock = job_lock(1, ttl_s=3, run_id=1)
    assert lock.acquire()
    calls: list[str] = []
    keeper = LockKeeper(
        lock, on_tick=lambda: calls.append("tick"), on_lost=lambda: calls.append("stop")
    )
    redis_client.set(job_lock_key(1), job_lock(1, run_id=2).token)

    keeper.tick()
    keeper.tick()

    assert calls == ["stop", "stop"]
    assert keeper.lost_reason == "another owner holds it"
