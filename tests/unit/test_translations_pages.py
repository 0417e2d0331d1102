"""The German catalogues of the job-side admin pages (issue 15, item 9):
the app's django.po (which also holds the queue, timeline, forecast, group,
variable, calendar, token, import and script pages and their validation
errors) and djangojs.po (the texts of the
admin's scripts, served by jobs/urls.py's takt-jsi18n). Complete, nothing
fuzzy, accepted by msgfmt --check (formats included), with the
placeholders of their msgids; the script catalogue compiled. The parsing
is tests/unit/test_translations.py's, which checks every catalogue."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_translations import ROOT, messages, parse_po, placeholders

MESSAGES = ROOT / "jobs/locale/de/LC_MESSAGES"
CATALOGUES = [MESSAGES / "django.po", MESSAGES / "djangojs.po"]


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.name)
def test_the_catalogue_is_complete_german_utf8_and_nothing_is_fuzzy(po: Path) -> None:
    header = parse_po(po)[0]
    assert header.msgid == "" and "fuzzy" not in header.flags
    assert "charset=UTF-8" in header.msgstr[0] and "Language: de" in header.msgstr[0]
    entries = messages(po)
    assert len(entries) > 50
    assert [e.msgid for e in entries if "fuzzy" in e.flags or not all(e.msgstr)] == []
    for e in entries:
        assert all(placeholders(text) == placeholders(e.msgid) for text in e.msgstr), e.msgid


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.name)
def test_msgfmt_check_accepts_the_catalogue(po: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        ["msgfmt", "--check", "--statistics", "-o", str(tmp_path / "out.mo"), str(po)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "untranslated" not in done.stderr and "fuzzy" not in done.stderr


def test_the_glossary_words_of_the_pages() -> None:
    """A few words the four catalogues share (docs/translation.md's glossary)."""
    said = {e.msgid: e.msgstr[0] for e in messages(MESSAGES / "django.po") if not e.msgctxt}
    assert said["Queue"] == "Warteschlange" and said["Maintenance mode"] == "Wartungsmodus"
    assert said["Timeline"] == "Zeitleiste" and said["Run now"] == "Jetzt ausführen"
    assert said["Worker"] == "Worker" and said["Beat"] == "Beat"
