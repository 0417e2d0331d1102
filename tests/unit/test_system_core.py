"""The catalogue of system functions (jobs/core/system.py): which targets a
system job may name, with which params, and the refusals naming the field."""

from __future__ import annotations

import pytest

from jobs.core.cron import TriggerError
from jobs.core.system import SYSTEM_FUNCTIONS, validate_system


@pytest.mark.parametrize(
    ("target", "params"),
    [
        ("takt.maintenance", {}),
        ("takt.maintenance", {"only": ["cleanup", "checks"]}),
        ("takt.cleanup", {}),
        ("takt.pause_queue", {"note": "backup"}),
        ("takt.resume_queue", {}),
        ("takt.maintenance_on", {"note": "upgrade"}),
        ("takt.maintenance_off", {}),
    ],
)
def test_accepted(target, params):
    assert validate_system(target, params) is SYSTEM_FUNCTIONS[target]


@pytest.mark.parametrize(
    ("target", "params", "field", "message"),
    [
        ("", {}, "target", "no target is a system function (one of takt.maintenance, "),
        ("takt.hello_world", {}, "target", "'takt.hello_world' is not a system function"),
        (
            "takt.resume_queue",
            {"note": "x"},
            "params",
            "takt.resume_queue does not take note (it takes: none)",
        ),
        (
            "takt.pause_queue",
            {"nite": "x"},
            "params",
            "takt.pause_queue does not take nite (it takes: note)",
        ),
        ("takt.pause_queue", {"note": 3}, "params", "note: a string, got 3"),
        (
            "takt.maintenance",
            {"only": []},
            "params",
            "only: a list of sections of lost, expire, cleanup, decisions, checks, schedules",
        ),
        ("takt.maintenance", {"only": ["vacuum"]}, "params", "only: a list of sections"),
        ("takt.maintenance", {"only": "cleanup"}, "params", "only: a list of sections"),
    ],
)
def test_refused_naming_the_field(target, params, field, message):
    with pytest.raises(TriggerError) as caught:
        validate_system(target, params)
    assert (caught.value.field, caught.value.message[: len(message)]) == (field, message)


def test_each_says_what_it_does_and_takes():
    assert SYSTEM_FUNCTIONS["takt.pause_queue"].describe() == (
        "Pause the queue (params: note: a note shown with the state, optional)"
    )
    assert SYSTEM_FUNCTIONS["takt.cleanup"].describe() == (
        "Delete finished runs older than TAKT_RETENTION_DAYS (no params)"
    )
