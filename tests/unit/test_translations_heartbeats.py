"""The heartbeats app's German catalogue (heartbeats/locale/de/LC_MESSAGES/
django.po): complete, nothing fuzzy, accepted by msgfmt --check, every
translation with the placeholders of its msgid, the .mo compiled from it
(read through the .mo: see tests/unit/test_translations.py for the .po);
and the words the pure core marks (heartbeat states, the operations page's
states), alert severities and the alert e-mail German under
translation.override("de"), and the "Why didn't it run?" checklist's
names, details and verdicts (heartbeats.checklist). No database."""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import translation

from heartbeats import checklist, labels
from heartbeats.core.check import phrase, status_phrase
from heartbeats.core.coordination import (
    ConditionFacts,
    ParentFacts,
    SlotHolder,
    SlotsFacts,
    condition_check,
    slot_checks,
)
from heartbeats.core.explain import BeatFacts, JobFacts, RunFacts, TriggerFacts, explain
from heartbeats.core.status import (
    FAILED_LABEL,
    NO_REPORT_LABEL,
    OK_LABEL,
    OVERDUE_LABEL,
    STATE_LABELS,
    HeartbeatState,
)
from heartbeats.models import Alert, AlertSeverity, Heartbeat
from heartbeats.notify import NotifyEvent, mail_text
from heartbeats.templatetags.takt_summary import takt_heartbeat_state
from jobs.core.cron import gettext_noop
from runs.core.start import Condition, SlotNeeds

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "heartbeats/locale/de/LC_MESSAGES/django.po"
MO = PO.with_suffix(".mo")


def catalog(mo: Path) -> dict[object, str]:
    """A compiled catalogue: msgid (or (msgid, n) for plurals) to msgstr."""
    with mo.open("rb") as handle:
        found = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    return {k: v for k, v in found.items() if k != ""}


def placeholders(text: str) -> list[str]:
    return sorted(re.findall(r"%\(\w+\)[sd]", text))


def test_nothing_is_fuzzy_or_left_empty():
    text = PO.read_text(encoding="utf-8")
    assert "Language: de\\n" in text
    assert "fuzzy" not in text
    # An empty msgstr is one not followed by a continued string (the header's is).
    assert not re.search(r'^msgstr(\[\d\])? ""\n(?!")', text, re.MULTILINE)
    assert len(catalog(MO)) >= 130


def test_msgfmt_checks_the_catalogue_and_the_mo_file_is_compiled_from_it(tmp_path):
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:
        pytest.skip("msgfmt (GNU gettext) is not installed")
    fresh = tmp_path / "django.mo"
    done = subprocess.run(
        [msgfmt, "--check", "--statistics", "-o", str(fresh), str(PO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "untranslated" not in done.stderr and "fuzzy" not in done.stderr, done.stderr
    assert catalog(fresh) == catalog(MO), "run compilemessages -l de in heartbeats/"


def test_every_translation_keeps_the_placeholders_of_its_msgid():
    problems = [
        (key, text)
        for key, text in catalog(MO).items()
        if placeholders(text) != placeholders(key[0] if isinstance(key, tuple) else str(key))
        and not (isinstance(key, tuple) and key[1] > 0)
    ]
    assert not problems


def test_the_cores_marked_words_are_in_the_catalogue():
    ids = {key[0] if isinstance(key, tuple) else key for key in catalog(MO)}
    marked = {*STATE_LABELS.values(), NO_REPORT_LABEL, OVERDUE_LABEL, FAILED_LABEL, OK_LABEL}
    assert marked <= ids
    assert set(STATE_LABELS) == set(HeartbeatState)


def test_states_severities_and_labels_in_german():
    with translation.override("de"):
        assert [labels.state_word(s) for s in HeartbeatState] == [
            "neu",
            "in Ordnung",
            "verspätet",
            "ausgefallen",
            "angehalten",
            "läuft",
        ]
        assert labels.severity_word(AlertSeverity.CRITICAL) == "kritisch"
        assert 'class="takt-badge takt-state-down">ausgefallen<' in takt_heartbeat_state("down")
        assert str(Heartbeat._meta.verbose_name_plural) == "Heartbeats"
        assert str(Alert._meta.verbose_name) == "Alarm"
        assert str(Heartbeat._meta.get_field("grace_s").verbose_name) == "Karenz (Sekunden)"
        assert dict(Heartbeat._meta.get_field("state").choices)["late"] == "Verspätet"
    assert labels.state_word("down") == "down"  # English stays the default
    assert labels.state_word("unknown") == "unknown"


PAYLOAD = {
    "event": NotifyEvent.REMINDER.value,
    "key": "overdue:7",
    "severity": "critical",
    "title": "Run 'nightly' overdue",
    "message": "…",
    "count": 3,
    "first_seen_at": "2026-03-02T09:00:00+00:00",
    "last_seen_at": "2026-03-02T10:00:00+00:00",
    "resolved_at": None,
}


def test_the_alert_mail_in_german_and_in_english():
    with translation.override("de"):
        subject, body = mail_text(PAYLOAD)
    assert subject == "[Takt] Erinnerung: Run 'nightly' overdue (kritisch)"
    assert "Schweregrad:     kritisch\n" in body and "Zuletzt gesehen: 2026-03-02" in body

    with translation.override("en"):
        subject, body = mail_text(PAYLOAD)
    assert subject == "[Takt] Reminder: Run 'nightly' overdue (critical)"
    assert "Severity:   critical\n" in body


NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
SOON = TriggerFacts(
    "cron 0 9 * * *", enabled=True, next_run_at=NOW + timedelta(hours=1), allowed_now=True
)
READY = JobFacts(
    name="report", enabled=True, triggers=(SOON,), beats=(BeatFacts("beat-1", True),), workers=1
)


def show(at: datetime) -> str:
    return f"{at:%H:%M} UTC"


def test_the_checklist_in_german_and_in_english():
    ready = explain(READY, now=NOW)
    held = explain(replace(READY, enabled=False, workers=0), now=NOW)

    with translation.override("de"):
        names = [checklist.check_name(c) for c in ready.checks]
        details = [checklist.check_text(c, show) for c in ready.checks]
        verdicts = [checklist.verdict_text(a, show) for a in (ready, held)]
    assert names[:4] == ["aktiviert", "Beat", "Scheduler-Schalter", "Warteschlange"]
    assert "Auslöser" in names and "Sperre" in names
    assert details[:3] == ["ja", "1 aktiv: beat-1", "an in beat-1"]
    assert "1 aktiviert: cron 0 9 * * *" in details and "um 09:00 UTC" in details
    assert verdicts == [
        "nichts hält ihn zurück: er läuft als Nächstes um 09:00 UTC",
        "zurückgehalten durch: aktiviert (der Job ist deaktiviert; Jetzt ausführen funktioniert"
        " weiterhin)",
    ]
    # English by default: the core's own words, as manage.py explain_job prints them.
    assert [checklist.check_text(c, show) for c in held.checks] == [
        c.text(show) for c in held.checks
    ]
    assert checklist.verdict_text(held, show) == held.verdict(show)
    assert checklist.verdict_text(ready, show) == ready.verdict(show)


def test_phrases_inside_a_check_are_translated_with_it():
    held = RunFacts(7, "queued", since=NOW - timedelta(minutes=1), held=True, waiting_for="group")
    facts = replace(READY, queue_paused=True, queue_pause_note="backup", active_runs=(held,))
    answer = explain(facts, now=NOW)
    by_name = {c.name: c for c in answer.checks}

    with translation.override("de"):
        queue = checklist.check_text(by_name["queue"], show)
        runs = checklist.check_text(by_name["active runs"], show)
    assert queue == "die Warteschlange ist angehalten: backup"
    assert runs == (
        "Lauf #7 ist eingereiht (zurückgehalten, wartet auf einen Platz in seiner"
        " Parallelitätsgruppe); der nächste Auslösezeitpunkt wird als übersprungen vermerkt;"
        " fällig seit 07:59 UTC"
    )
    assert [checklist.check_text(c, show) for c in answer.checks] == [
        c.text(show) for c in answer.checks
    ]


def test_a_childs_parent_check_in_german():
    parent = ParentFacts(
        "'Nightly' (#3)", next_run_at=NOW + timedelta(hours=1), position=2, siblings=3,
        stop_on_failure=True, running_run=40,
    )  # fmt: skip
    answer = explain(replace(READY, triggers=(), parent=parent), now=NOW)
    (check,) = [c for c in answer.checks if c.name == "parent"]

    with translation.override("de"):
        assert checklist.check_name(check) == "übergeordneter Job"
        assert checklist.check_text(check, show) == (
            "Unterjob von Job 'Nightly' (#3): er läuft nur als Teil des Laufs seines"
            " übergeordneten Jobs, 2. seiner 3 aktivierten Unterjobs (ein fehlgeschlagener"
            " Unterjob stoppt die nachfolgenden); der Lauf #40 des übergeordneten Jobs läuft"
            " gerade; der übergeordnete Job läuft als Nächstes um 09:00 UTC"
        )
    assert checklist.check_text(check, show) == check.text(show)


def test_a_full_group_in_german():
    holders = tuple(SlotHolder(n, "'Import' (#2)") for n in (11, 12, 13, 14))
    slots = SlotsFacts(SlotNeeds(group=1, group_limit=4), group_name="imports", group=holders)
    group, exclusive = slot_checks(slots, [(20, "group")])

    with translation.override("de"):
        assert checklist.check_text(group, show) == (
            "'imports' (Limit 4): seine Gruppe ist voll (4 von 4 laufend), von Lauf #11 von Job"
            " 'Import' (#2), Lauf #12 von Job 'Import' (#2), Lauf #13 von Job 'Import' (#2) und"
            " 1 weitere; ein neuer Lauf wartet (zurückgehalten) auf einen Platz und wird dafür"
            " nie übersprungen; Lauf #20 dieses Jobs wartet auf einen"
        )
        assert (
            checklist.check_text(exclusive, show) == "kein exklusiver Lauf hält die Gruppen zurück"
        )
    assert checklist.check_text(group, show) == group.detail


def test_a_condition_not_met_in_german():
    facts = ConditionFacts(Condition("Import done", (0, 200)), -1, writers=("'Import' (#2)",))
    check = condition_check(facts)

    with translation.override("de"):
        text = checklist.check_text(check, show)
    assert "; geschrieben von Job 'Import' (#2); bis sie erfüllt ist" in text
    assert text.endswith("und Jetzt ausführen wird abgelehnt")
    assert checklist.check_text(check, show) == check.detail


def test_a_dependency_in_german():
    after = TriggerFacts(
        "after job 'Import' (#3) ends succeeded", enabled=True, next_run_at=None,
        allowed_now=True, upstream="'Import' (#3)", statuses=("succeeded", "failed"),
        upstream_last=phrase(
            gettext_noop("its last run #%(run)s ended %(status)s"),
            run=40, status=status_phrase(["failed"]),
        ),
    )  # fmt: skip
    answer = explain(replace(READY, triggers=(after,)), now=NOW)
    (check,) = [c for c in answer.checks if c.name == "trigger"]

    with translation.override("de"):
        assert checklist.check_text(check, show) == (
            "1 aktiviert: startet, wenn Job 'Import' (#3) erfolgreich oder fehlgeschlagen endet"
            " (sein letzter Lauf #40 endete mit Status fehlgeschlagen)"
        )
        assert checklist.verdict_text(answer, show) == (
            "nichts hält ihn zurück: er läuft, wenn Job 'Import' (#3) erfolgreich oder"
            " fehlgeschlagen endet"
        )
        assert checklist.runs_next_words(answer).startswith("er läuft, wenn Job")
    assert (
        checklist.check_text(check, show)
        == check.detail
        == (
            "1 enabled: starts when job 'Import' (#3) ends succeeded or failed"
            " (its last run #40 ended failed)"
        )
    )
    assert checklist.verdict_text(answer, show) == answer.verdict(show)
    assert checklist.runs_next_words(answer) == answer.runs_next_words()
