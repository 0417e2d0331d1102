"""The pure core of watched folders (F-16, F-17): which names a file
trigger takes, what a RUN file asks for, when a file has settled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.cron import TriggerError
from jobs.core.triggers import compute_fire_times, describe, validate_spec
from jobs.core.watch import (
    FileSpec,
    Settler,
    dedupe_key,
    done_parts,
    printable,
    root_problem,
    run_request,
    takes,
    validate_file_spec,
)

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


# --- issue 25: where a watcher may look, what it prints ---------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (FileSpec("/srv/in\x1b[2Jbox"), "watch_folder"),
        (FileSpec("/srv/inbox", "*\x1b[31m.csv"), "watch_pattern"),
        (FileSpec("/srv/in\u202ebox"), "watch_folder"),
    ],
)
def test_a_control_character_in_the_folder_or_pattern_is_refused_shown_escaped(spec, field):
    with pytest.raises(TriggerError) as caught:
        validate_file_spec(spec)
    assert caught.value.field == field and "has a control character in it" in caught.value.message
    assert "\x1b" not in str(caught.value.params) and "\u202e" not in str(caught.value.params)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("/in/orders.csv", "/in/orders.csv"),
        ("/in/Bestellung für März.csv", "/in/Bestellung für März.csv"),
        ("/in/a\x1b[2J\x1b]0;x\a.csv", "/in/a\\x1b[2J\\x1b]0;x\\x07.csv"),
        ("/in/a\nb\tc\r", "/in/a\\nb\\tc\\r"),
        ("/in/a\x9bb\x7f", "/in/a\\x9bb\\x7f"),  # C1 CSI, DEL
        ("/in/txt.\u202egpj", "/in/txt.\\u202egpj"),  # a bidi override
        ("/in/\udcff.csv", "/in/\\udcff.csv"),  # a byte that was not UTF-8
    ],
)
def test_printable_escapes_what_a_terminal_would_act_on(text, shown):
    assert printable(text) == shown


@pytest.mark.parametrize(
    ("folder", "roots", "refused"),
    [
        ("/", [], True),
        ("/root", [], True),
        ("/root/inbox", [], True),
        ("/etc/cron.d", [], True),
        ("/home", [], True),
        ("/home/erp/inbox", [], False),
        ("/tmp", [], True),
        ("/tmp/pytest-of-takt/inbox", [], False),
        ("/srv", [], True),
        ("/srv/erp/inbox", [], False),
        ("/var/lib/takt/inbox", [], True),
        ("/library", [], False),  # not below /lib
        ("/srv/erp/inbox", ["/srv/erp"], False),
        ("/srv/erp", ["/srv/erp"], False),
        ("/srv/erpx", ["/srv/erp"], True),
        ("/home/erp/inbox", ["/srv/erp", "/data"], True),
        ("/etc/takt", ["/etc/takt"], False),  # named in the roots: allowed
    ],
)
def test_a_folder_must_be_inside_the_roots_or_no_system_folder(folder, roots, refused):
    assert (root_problem(folder, roots) is not None) is refused


@pytest.mark.parametrize(
    ("done", "parts"),
    [
        ("", ()),
        ("done", ("done",)),
        ("done/2026/", ("done", "2026")),
        ("./done", ("done",)),
        ("/srv/requests/done", ("done",)),
    ],
)
def test_the_done_folder_is_named_below_the_request_folder(done, parts):
    assert done_parts("/srv/requests", done) == parts


@pytest.mark.parametrize(
    "done", ["..", "../done", "done/../../x", "/srv/elsewhere", "/srv/requests"]
)
def test_a_done_folder_outside_the_request_folder_is_refused(done):
    with pytest.raises(ValueError, match="is not a folder inside the request folder"):
        done_parts("/srv/requests", done)


def test_the_settings_refuse_a_done_folder_outside_and_relative_roots():
    from django.core.exceptions import ImproperlyConfigured

    from scheduler_project.takt_settings import takt_settings

    folders = {"TAKT_RUN_FILE_FOLDERS": "/srv/a:/srv/b"}
    assert takt_settings(environ={**folders, "TAKT_RUN_FILE_DONE_FOLDER": "done"})
    with pytest.raises(ImproperlyConfigured, match="TAKT_RUN_FILE_DONE_FOLDER: '/srv/a/done'"):
        takt_settings(environ={**folders, "TAKT_RUN_FILE_DONE_FOLDER": "/srv/a/done"})
    with pytest.raises(ImproperlyConfigured, match="TAKT_WATCH_ROOTS: 'srv' must be an absolute"):
        takt_settings(environ={"TAKT_WATCH_ROOTS": "/data:srv"})
    assert takt_settings(environ={"TAKT_WATCH_ROOTS": "/data:/srv"})["TAKT_WATCH_ROOTS"] == [
        "/data",
        "/srv",
    ]
