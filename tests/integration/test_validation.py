"""Bad trigger input names its field and changes nothing stored (section 11,
F-10, F-12, F-13): Trigger.full_clean, which the admin's forms run."""

from __future__ import annotations

import pytest
import time_machine
from django.core.exceptions import ValidationError

from jobs.models import Trigger
from tests.integration.conftest import SECOND, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2025, 3, 29, 12, 0)  # the day before Berlin springs forward


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cron_expression": "61 * * * *"}, "cron_expression"),
        ({"cron_expression": "0 0 31 4 *"}, "cron_expression"),
        ({"cron_expression": ""}, "cron_expression"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"kind": "interval", "interval_seconds": 0}, "interval_seconds"),
        ({"kind": "interval", "interval_seconds": 2592001}, "interval_seconds"),
        ({"kind": "interval", "interval_seconds": None}, "interval_seconds"),
        ({"kind": "once", "run_at": T0 - SECOND}, "run_at"),
        ({"kind": "once", "run_at": T0}, "run_at"),
        ({"kind": "once", "run_at": None}, "run_at"),
    ],
)
def test_an_invalid_trigger_is_refused_naming_the_field_and_the_stored_row_stays(changes, field):
    job = make_job()
    stored = make_trigger(
        job, created_at=T0 - 3600 * SECOND, kind="cron", cron_expression="0 9 * * *"
    )
    before = Trigger.objects.filter(pk=stored.pk).values().get()
    edited = Trigger.objects.get(pk=stored.pk)
    for name, value in changes.items():
        setattr(edited, name, value)

    with time_machine.travel(T0, tick=False), pytest.raises(ValidationError) as exc:
        edited.full_clean()

    assert set(exc.value.error_dict) == {field}
    assert Trigger.objects.filter(pk=stored.pk).values().get() == before


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "interval", "interval_seconds": 1},
        {"kind": "interval", "interval_seconds": 2592000},
        {"kind": "once", "run_at": T0 + SECOND},
        {"kind": "cron", "cron_expression": "0 30 8 ? * MON-FRI"},
    ],
)
def test_the_limits_themselves_are_accepted(fields):
    trigger = Trigger(job=make_job(), **fields)
    with time_machine.travel(T0, tick=False):
        trigger.full_clean()
        trigger.save()
    assert trigger.next_run_at is not None


def test_a_time_zone_is_stored_in_its_canonical_spelling():
    trigger = Trigger(
        job=make_job(), kind="cron", cron_expression="0 9 * * *", timezone="europe/vienna"
    )

    trigger.full_clean()
    trigger.save()

    assert Trigger.objects.get(pk=trigger.pk).timezone == "Europe/Vienna"


def test_saving_without_validation_still_refuses_a_cron_that_cannot_be_evaluated():
    job = make_job()

    with pytest.raises(ValidationError) as caught:
        Trigger.objects.create(job=job, kind="cron", cron_expression="61 * * * *")

    assert caught.value.message_dict == {"cron_expression": ["minute: 61 is out of range 0-59"]}

    assert not Trigger.objects.filter(job=job).exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"retry_backoff_s": 60, "retry_backoff_max_s": 59}, "retry_backoff_max_s"),
        ({"retry_backoff_factor": 0.5}, "retry_backoff_factor"),
        ({"retry_jitter": 1.5}, "retry_jitter"),
        ({"max_retries": 101}, "max_retries"),
        ({"non_retryable_exceptions": "Value Error"}, "non_retryable_exceptions"),
        ({"catchup_window_s": -1}, "catchup_window_s"),
        ({"catchup_max_runs": 0}, "catchup_max_runs"),
        ({"max_instances": 0}, "max_instances"),
        ({"max_buffered": 1001}, "max_buffered"),
        ({"overlap_policy": "sometimes"}, "overlap_policy"),
        ({"missed_run_policy": "maybe"}, "missed_run_policy"),
        ({"timeout_action": "explode"}, "timeout_action"),
    ],
)
def test_an_invalid_job_policy_is_refused_naming_the_field_and_the_stored_row_stays(changes, field):
    from jobs.models import Job

    stored = make_job("policies")
    before = Job.objects.filter(pk=stored.pk).values().get()
    edited = Job.objects.get(pk=stored.pk)
    for name, value in changes.items():
        setattr(edited, name, value)
    with pytest.raises(ValidationError) as err:
        edited.full_clean()
    assert field in err.value.message_dict, err.value.message_dict
    assert Job.objects.filter(pk=stored.pk).values().get() == before
