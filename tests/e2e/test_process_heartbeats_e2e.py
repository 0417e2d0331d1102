"""F-61: the worker and beat processes report their own heartbeats."""

from __future__ import annotations

import pytest

from heartbeats.models import Heartbeat
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_worker_and_beat_report_their_own_heartbeats(worker, beat):
    beat()
    wait_until(
        lambda: (
            Heartbeat.objects.filter(name__startswith="worker:e2e-").exists()
            and Heartbeat.objects.filter(name__startswith="beat@").exists()
        ),
        20,
        "the worker's and the beat's heartbeats",
    )
    for hb in Heartbeat.objects.filter(job__isnull=True):
        assert hb.deadline_s == 120 and hb.last_status == "succeeded"
