"""Issue 27 (2): maintenance by lock file in a cluster. The file exists on
one host; every beat reports the lock files it sees (runs.lock_files), and
maintenance by file is on while any live beat sees one. Before, a beat
that did not see the file cleared the workers' copy every 30 s: maintenance
went off and on, its alert resolved and raised again each time.

"Another beat on another host" is a Reporter with its own id and host name
that reports a file this test process's own beat (run_tick) does not see
on its disk."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from heartbeats.models import Alert
from runs.execution import execute
from runs.lock_files import Reporter, request_removal, seen_in_cluster
from runs.models import RunStatus
from runs.queue import in_maintenance, maintenance_key
from runs.services import enqueue_job
from runs.tick import run_tick
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2027, 4, 1, 8, 0)


@pytest.fixture
def lock_paths(settings: Any, tmp_path: Any) -> tuple[Any, Any]:
    normal, admin = tmp_path / "NoLock.ini", tmp_path / "AdminLock.ini"
    settings.TAKT_MAINTENANCE_LOCK_FILE = f"{normal}, {admin}"
    return normal, admin


def test_a_file_only_another_hosts_beat_sees_keeps_maintenance_on_here(
    redis_client: Any, lock_paths: tuple[Any, Any]
) -> None:
    normal, _ = lock_paths
    other = Reporter("erp-host:4711", "erp-host")
    assert [str(s) for s in other.exchange(seen_here=(str(normal),))] == [f"{normal} on erp-host"]

    for second in range(0, 95, 31):  # this beat has no such file on its disk
        run_tick(now=T0 + second * SECOND)
        assert redis_client.get(maintenance_key()) == b"1", f"off after {second} s"
        other.exchange(seen_here=(str(normal),))  # the other beat's next tick

    alert = Alert.objects.get(key="maintenance")
    assert alert.resolved_at is None and alert.count == 1  # raised once, never flapping
    assert f"the lock file {normal} on erp-host exists" in alert.message
    assert in_maintenance()  # a web process or a worker asks the cluster too


def test_the_other_beat_going_silent_or_seeing_it_gone_ends_it(
    redis_client: Any, lock_paths: tuple[Any, Any]
) -> None:
    normal, _ = lock_paths
    other = Reporter("erp-host:4711", "erp-host")
    other.exchange(seen_here=(str(normal),))
    run_tick(now=T0)
    assert redis_client.get(maintenance_key()) == b"1"

    other.exchange(seen_here=())  # the file was deleted on its host
    run_tick(now=T0 + SECOND)
    assert redis_client.get(maintenance_key()) is None
    assert Alert.objects.get(key="maintenance").resolved_at is not None

    other.exchange(seen_here=(str(normal),))
    run_tick(now=T0 + 2 * SECOND)
    assert redis_client.get(maintenance_key()) == b"1"
    redis_client.delete("takt:maint:files:erp-host:4711")  # its report expired: it went silent
    run_tick(now=T0 + 3 * SECOND)
    assert redis_client.get(maintenance_key()) is None
    assert seen_in_cluster() == []


def test_each_file_with_its_host_on_the_queue_api(
    redis_client: Any, lock_paths: tuple[Any, Any], client: Any, admin_user: Any
) -> None:
    normal, admin = lock_paths
    admin.write_text("")  # here
    Reporter("erp-host:4711", "erp-host").exchange(seen_here=(str(normal),))
    run_tick(now=T0)

    client.force_login(admin_user)
    status = client.get("/api/v1/queue").json()
    assert status["maintenance"] and status["maintenance_lock_file"]
    assert status["maintenance_lock_files"] == [
        {"path": str(admin), "host": socket.gethostname()},
        {"path": str(normal), "host": "erp-host"},
    ]
    page = client.get("/admin/takt_jobs/queuestate/").content.decode()
    assert f"the lock file {normal} exists on erp-host" in page


def test_removing_a_lock_file_reaches_the_beat_that_sees_it(
    redis_client: Any, lock_paths: tuple[Any, Any]
) -> None:
    """takt.remove_lock_file (and maintenance_off) run on a worker, perhaps
    on another host: the beats delete the file where they see it."""
    normal, admin = lock_paths
    normal.write_text("")
    admin.write_text("")
    run_tick(now=T0)
    assert redis_client.get(maintenance_key()) == b"1"

    request_removal([str(normal)])  # as a worker on another host would ask
    run_tick(now=T0 + SECOND)
    assert not normal.exists() and admin.exists()  # the beat deleted what was asked
    assert redis_client.get(maintenance_key()) == b"1"  # the admin lock file still holds

    job = make_job(
        "remove the admin lock", target="takt.remove_lock_file", params={"path": str(admin)}
    )
    run = enqueue_job(job, trigger="manual", now=T0 + 2 * SECOND)  # allowed during maintenance
    assert execute(run.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.SUCCEEDED
    assert not admin.exists()
    run_tick(now=T0 + 3 * SECOND)
    assert redis_client.get(maintenance_key()) is None

    wrong = make_job("wrong", target="takt.remove_lock_file", params={"path": "/etc/passwd"})
    run = enqueue_job(wrong, trigger="manual", now=T0 + 4 * SECOND)
    assert execute(run.pk, worker="w", clock=clock(T0 + 4 * SECOND)) == RunStatus.FAILED
    run.refresh_from_db()
    assert "is not one of TAKT_MAINTENANCE_LOCK_FILE's files" in run.message
