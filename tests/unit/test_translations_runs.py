"""The runs app's German catalogue (runs/locale/de/LC_MESSAGES/django.po):
complete, nothing fuzzy, accepted by msgfmt --check (formats included),
every translation with the placeholders of its msgid (its .mo is checked
with every catalogue's in test_translations.py), and every label a run
shows (statuses, triggers, waiting reasons, field names and help texts)
German under translation.override("de"). No database."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.utils import translation

from jobs.i18n import translated
from runs import labels
from runs.admin.badges import status_badge
from runs.core.start import Condition, condition_message, condition_text
from runs.models import AuditRecord, Run, RunStatus, RunTrigger, WaitingFor
from tests.unit.test_translations import messages, parse_po, placeholders

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "runs/locale/de/LC_MESSAGES/django.po"

# German words that are spelt as in English (the glossary keeps them).
SAME_IN_GERMAN = {"Status", "Job", "Details", "API", "Task in Flower", "Worker", "worker"}


def test_the_catalogue_is_complete_and_nothing_is_fuzzy():
    header = parse_po(PO)[0]
    assert header.msgid == "" and "fuzzy" not in header.flags
    assert "Language: de\n" in header.msgstr[0]
    assert len(messages(PO)) >= 150
    problems = [e.msgid for e in messages(PO) if "fuzzy" in e.flags or not all(e.msgstr)]
    assert problems == []


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
def test_msgfmt_accepts_it_with_its_checks(tmp_path):
    done = subprocess.run(
        ["msgfmt", "--check", "--statistics", "-o", str(tmp_path / "django.mo"), str(PO)],
        capture_output=True,
        text=True,
        check=False,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "untranslated" not in done.stderr and "fuzzy" not in done.stderr, done.stderr


def test_translations_keep_their_placeholders():
    problems = []
    for e in messages(PO):
        for i, text in enumerate(e.msgstr):
            source = e.msgid_plural if e.msgid_plural and i > 0 else e.msgid
            if placeholders(text) != placeholders(source):
                problems.append((e.msgid, text))
    assert problems == []


def german(text: object) -> str:
    with translation.override("de"):
        return str(text)


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_status_has_a_german_word_and_label(status):
    with translation.override("de"):
        word, label = labels.status_word(status), str(status.label)
        badge = status_badge(status)
    assert word != labels.status_word(status) and label != str(status.label)
    assert f'class="takt-badge takt-status-{status.value}">{word}<' in badge


def test_the_glossary_words_of_statuses_and_triggers():
    with translation.override("de"):
        words = {s.value: labels.status_word(s) for s in RunStatus}
        triggers = {t.value: labels.trigger_label(t) for t in RunTrigger}
    assert words == {
        "queued": "eingereiht",
        "running": "läuft",
        "succeeded": "erfolgreich",
        "failed": "fehlgeschlagen",
        "timed_out": "Zeitüberschreitung",
        "skipped": "übersprungen",
        "cancelled": "abgebrochen",
        "lost": "verloren",
    }
    assert triggers["schedule"] == "Zeitplan" and triggers["retry"] == "Wiederholung"
    assert triggers["dependency"] == "Abhängigkeit"
    # English stays the default, and the codes are kept for unknown values.
    assert labels.status_word("timed_out") == "timed out"
    assert labels.trigger_label("schedule") == "Schedule"
    assert [labels.trigger_word(t) for t in RunTrigger] == list(RunTrigger.values)
    with translation.override("de"):
        assert labels.trigger_word("parent") == "übergeordneter Job"
    assert labels.status_word("gone_away") == "gone away"


@pytest.mark.parametrize("model", [Run, AuditRecord])
def test_every_field_name_and_help_text_is_german(model):
    untranslated = []
    for field in model._meta.get_fields():
        if not hasattr(field, "verbose_name") or field.auto_created:
            continue
        for text in (field.verbose_name, field.help_text):
            if text and german(text) == str(text) and str(text) not in SAME_IN_GERMAN:
                untranslated.append(str(text))
    assert untranslated == []
    assert german(model._meta.verbose_name) != str(model._meta.verbose_name)
    assert german(model._meta.verbose_name_plural) != str(model._meta.verbose_name_plural)


def test_waiting_reasons_are_german():
    assert [german(w.label) for w in WaitingFor] == [
        "seinen Job oder die Warteschlange",
        "einen Platz seiner Parallelitätsgruppe",
        "freie Plätze in allen Gruppen (exklusiver Job)",
        "einen Platz unter TAKT_MAX_CONCURRENCY",
    ]


def test_a_condition_not_met_is_stored_in_english_and_shown_in_german():
    condition = Condition("Import done", (0, 200))
    template, params = condition_message(condition, -1)
    assert template % params == condition_text(condition, -1)
    assert condition_text(condition, -1) == (
        "condition not met: variable 'Import done' is -1, it must be 0 or 200"
    )
    with translation.override("de"):
        shown = translated(template, params)
        unknown = translated(*condition_message(Condition("v", (1, 2, 3)), None))
    assert (
        shown == "Bedingung nicht erfüllt: Variable 'Import done' ist -1, sie muss 0 oder 200 sein"
    )
    assert (
        unknown == "Bedingung nicht erfüllt: Variable 'v' ist unbekannt, sie muss 1, 2 oder 3 sein"
    )


def test_a_run_names_itself_in_the_readers_language():
    run = Run(pk=5, job_id=2, status=RunStatus.TIMED_OUT)
    assert str(run) == "Run #5 of job #2 (timed out)"
    assert german(run) == "Lauf #5 von Job #2 (Zeitüberschreitung)"
