"""A Redis Sentinel failover under load (F-85, issue 12): a real worker and
beat reach Redis only through three sentinels (REDIS_SENTINELS; REDIS_URL
points nowhere), jobs fire every second, and the master gets SIGKILL. The
sentinels promote the replica; the runs go on against the new master, no
fire time is executed twice (an O_APPEND side-channel file, outside Takt's
tables and Redis, records every execution), and every run ends."""

from __future__ import annotations

import importlib.util
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.utils import timezone

import tests.e2e.sentinel_jobs  # noqa: F401  (registers tests.append_run_id here too)
from jobs.models import Job, Trigger
from runs.models import Run, RunStatus
from tests.e2e.conftest import wait_until
from tests.processes import free_port
from tests.sentinelcluster import MASTER_NAME, SentinelCluster

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

JOBS = 3
# After the promotion: runs succeed again on the new master. A killed master
# closes its connections; a cut-off one (SIGSTOP) leaves them open and silent
# until the socket timeouts and kombu's BRPOP health check give up on them.
RESUME_WITHIN_S = {signal.SIGKILL: 15, signal.SIGSTOP: 30}
DRAIN_WITHIN_S = 45  # after the beat stops: no run left queued or running
OPEN = (RunStatus.QUEUED, RunStatus.RUNNING)
# The re-send of published runs whose message is gone (issue 12, branch `resend`).
RESEND_PRESENT = importlib.util.find_spec("runs.delivery") is not None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    (tmp_path / "sentinel").mkdir()
    setup = SentinelCluster(tmp_path / "sentinel")
    try:
        setup.start()
        yield setup
    finally:
        setup.stop()


def executions(path: Path) -> list[int]:
    """The run ids the side channel recorded, one per execution."""
    if not path.exists():
        return []
    return [int(line.split()[0]) for line in path.read_text().splitlines() if line]


def ended_counts(address: tuple[str, int]) -> int:
    counts = redis.Redis(host=address[0], port=address[1]).hgetall("takt:metrics:runs")
    return sum(int(n) for n in counts.values())


CUT_OFF_GAP = (
    "a master that hangs with its connections open (SIGSTOP, as when cut off by the network):"
    " the sentinels promote the replica, but a worker whose BRPOP connection kombu 5.7 drops"
    " as stale was seen idle without consuming again, and a beat dispatching nothing; the"
    " socket timeouts (3 s) and the BRPOP health check (2 s) with Sentinel shorten, not close, it"
)


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(signal.SIGKILL, id="killed"),
        pytest.param(
            signal.SIGSTOP, id="cut-off", marks=pytest.mark.xfail(strict=False, reason=CUT_OFF_GAP)
        ),
    ],
)
# three Redis, three sentinels, a failover and its timeouts: about 40 s
# alone, twice that beside CPU burners
@pytest.mark.timeout(180)
def test_a_master_failover_doubles_no_run_and_the_runs_go_on(cluster, start_process, tmp_path, how):
    side_channel = tmp_path / "executions.log"
    env = {
        "REDIS_SENTINELS": cluster.sentinels_setting,
        "REDIS_SENTINEL_MASTER": MASTER_NAME,
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens: not used
        "TAKT_JOB_MODULES": "tests.sample_jobs,tests.e2e.sentinel_jobs",
    }
    worker = start_process("worker", concurrency=2, **env)
    beat = start_process("beat", **env)
    jobs = [
        Job.objects.create(
            name=f"every second {i}",
            target="tests.append_run_id",
            params={"path": str(side_channel)},
        )
        for i in range(JOBS)
    ]
    for job in jobs:
        Trigger.objects.create(
            job=job, kind="cron", cron_expression="* * * * * *", timezone="Europe/Berlin"
        )

    def each_job_succeeded(since=None, times=1):  # type: ignore[no-untyped-def]
        runs = Run.objects.filter(status=RunStatus.SUCCEEDED)
        if since is not None:
            runs = runs.filter(started_at__gt=since)
        return all(runs.filter(job=job).count() >= times for job in jobs)

    wait_until(lambda: each_job_succeeded(times=3), 30, "three runs of each job before the kill")
    old = cluster.master_address()
    assert old is not None

    cluster.kill_master(how)
    killed, killed_at = time.monotonic(), timezone.now()
    new = cluster.wait_for_failover(old)
    promoted_s = time.monotonic() - killed
    ended_at_promotion = ended_counts(new)
    wait_until(
        lambda: each_job_succeeded(since=killed_at, times=2),
        RESUME_WITHIN_S[how],
        "each job to run twice more on the new master",
    )
    resumed_s = time.monotonic() - killed
    time.sleep(2)  # a few more fire times on the new master
    assert worker.popen.poll() is None and beat.popen.poll() is None
    beat.stop()  # no new fire times from here on

    # Takt's own Redis client (locks, metrics, the decision log) follows the
    # master: the runs' ends are counted on the new master.
    assert ended_counts(new) > ended_at_promotion

    # No fire time executed twice: one line per run in the side channel,
    # and one run per (job, fire time) among them.
    executed = executions(side_channel)
    twice = [run_id for run_id, n in Counter(executed).items() if n > 1]
    assert twice == [], f"runs executed twice: {twice}"
    fire_times = Counter(
        Run.objects.filter(pk__in=executed).values_list("job_id", "scheduled_for")
    )  # fmt: skip
    assert len(fire_times) == len(executed)
    succeeded = set(Run.objects.filter(status=RunStatus.SUCCEEDED).values_list("pk", flat=True))
    assert succeeded <= set(executed)  # nothing recorded as run that did not run
    print(  # the figures of the run, for the report (pytest -s)
        f"\n{how.name}: promoted after {promoted_s:.1f} s, runs resumed {resumed_s:.1f} s after;"
        f" {len(executed)} executions, {len(succeeded)} runs succeeded"
    )

    # Every run ends. Runs in flight at the kill may have lost their message
    # (not yet replicated, or popped and not yet recorded as unacked): those
    # wait for the re-send of lost messages.
    def open_runs() -> list[tuple[int, str, bool]]:
        rows = Run.objects.filter(status__in=OPEN).values_list("pk", "status", "published_at")
        return [(pk, status, published is not None) for pk, status, published in rows]

    try:
        wait_until(lambda: not open_runs(), DRAIN_WITHIN_S, "every run to end")
    except AssertionError:
        if not RESEND_PRESENT:
            pytest.xfail(
                f"runs left open {open_runs()}: their messages were lost in the failover and"
                " the re-send of lost messages (runs/delivery.py, branch resend) is not here yet"
            )
        raise
    worker.stop()  # before the cluster goes
    statuses = Counter(Run.objects.filter(pk__in=executed).values_list("status", flat=True))
    assert statuses == {RunStatus.SUCCEEDED: len(executed)}  # every execution's end recorded
