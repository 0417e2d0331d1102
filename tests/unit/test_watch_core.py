"""The pure core of watched folders (F-16, F-17): which names a file
trigger takes, what a RUN file asks for, when a file has settled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.cron import TriggerError
from jobs.core.triggers import compute_fire_times, describe, validate_spec
from jobs.core.watch import FileSpec, Settler, dedupe_key, run_request, takes, validate_file_spec

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (FileSpec(""), "watch_folder", "required"),
        (FileSpec("srv/inbox"), "watch_folder", "absolute path"),
        (FileSpec("/srv/inbox", ""), "watch_pattern", "required"),
        (FileSpec("/srv/inbox", "in/*.csv"), "watch_pattern", "is a path"),
        (FileSpec("/srv/inbox", "*.csv", False, -1), "settle_seconds", "0 to 3600"),
        (FileSpec("/srv/inbox", "*.csv", False, 3601), "settle_seconds", "0 to 3600"),
    ],
)
def test_a_bad_file_trigger_is_refused_naming_the_field(spec, field, words):
    with pytest.raises(TriggerError) as caught:
        validate_file_spec(spec)
    assert caught.value.field == field and words in caught.value.message


def test_the_folder_is_stored_tidy_and_the_trigger_has_no_fire_times():
    spec = validate_spec(FileSpec("/srv/inbox/../inbox/", " *.csv "), now=T0)
    assert spec == FileSpec("/srv/inbox", "*.csv", False, 2)
    assert compute_fire_times(spec, after=T0, count=5) == []
    assert describe(spec) == (
        "when a file matching *.csv appears or changes in /srv/inbox, once unchanged for 2 s"
    )


def test_which_files_a_trigger_takes():
    flat = FileSpec("/srv/inbox", "*.csv")
    deep = FileSpec("/srv/inbox", "*.csv", recursive=True)
    assert takes(flat, "/srv/inbox/orders.csv")
    assert not takes(flat, "/srv/inbox/orders.CSV")  # names are case-sensitive
    assert not takes(flat, "/srv/inbox/.orders.csv")  # hidden: still being uploaded
    assert not takes(flat, "/srv/inbox/2026/orders.csv")
    assert takes(deep, "/srv/inbox/2026/orders.csv")
    assert not takes(deep, "/srv/inboxes/orders.csv")
    assert not takes(flat, "/srv/inbox/orders.csv.part")


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        ("Takt22.RUN", 22),
        ("takt22.run", 22),  # prefix and suffix in any case
        ("TAKT7.Run", 7),
        ("Takt.RUN", "not a run request"),
        ("TaktX.RUN", "not a run request"),
        ("Takt0.RUN", "not a run request"),
        ("Takt22.RUN.error", None),
        ("Other22.RUN", None),
        ("report.csv", None),
    ],
)
def test_what_a_run_file_asks_for(name, wanted):
    got = run_request(name, "Takt")
    if isinstance(wanted, str):
        assert isinstance(got, str) and wanted in got and "Takt<job id>.RUN" in got
    else:
        assert got == wanted


def test_a_file_written_in_chunks_settles_once_with_its_last_size():
    settler = Settler(2 * S)
    settler.saw("/in/a.csv", size=10, mtime_ns=1, event="created", now=T0)
    settler.saw("/in/a.csv", size=20, mtime_ns=2, event="modified", now=T0 + S)
    assert settler.ready(T0 + 2 * S) == []  # changed a second ago
    settler.saw("/in/a.csv", size=30, mtime_ns=3, event="modified", now=T0 + 2 * S)
    assert settler.ready(T0 + 3 * S) == []
    assert settler.ready(T0 + 4 * S) == [("/in/a.csv", 30, 3, "created")]
    assert settler.ready(T0 + 9 * S) == []  # handed out once


def test_a_look_that_finds_the_file_unchanged_does_not_restart_its_wait():
    settler = Settler(2 * S)
    settler.saw("/in/a.csv", size=10, mtime_ns=1, event="found", now=T0)
    settler.saw("/in/a.csv", size=10, mtime_ns=1, event="seen", now=T0 + S)
    assert settler.ready(T0 + 2 * S) == [("/in/a.csv", 10, 1, "found")]


def test_a_file_renamed_away_before_it_settles_starts_nothing():
    settler = Settler(2 * S)
    settler.saw("/in/a.tmp", size=10, mtime_ns=1, event="created", now=T0)
    settler.gone("/in/a.tmp")
    assert settler.ready(T0 + 5 * S) == []


def test_the_dedupe_key_names_the_state_of_the_file_and_fits_the_column():
    key = dedupe_key("/srv/" + "x" * 4000, 10, 123)
    assert len(key) <= 200
    assert key != dedupe_key("/srv/" + "x" * 4000, 11, 123)
    assert key != dedupe_key("/srv/" + "x" * 4000, 10, 124)
    assert key == dedupe_key("/srv/" + "x" * 4000, 10, 123)
