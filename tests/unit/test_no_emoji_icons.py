"""Status icons are drawn, not emoji (issue 29, A.4): a machine without an
emoji font shows empty boxes for them. No template, script, stylesheet or
Python module of Takt's apps holds an emoji or pictograph code point
(admin/takt/check_icon.html draws the check marks in SVG)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("jobs", "runs", "heartbeats", "scheduler_project")
SUFFIXES = {".html", ".js", ".css", ".py", ".txt"}
# Miscellaneous symbols and dingbats (✅ ❌ ⚠ ⏸ ⏳ ★ …), the pictographs and
# emoji planes (🔒 🟢 …) and the emoji variation selector.
EMOJI = re.compile("[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]")


def sources() -> list[Path]:
    return sorted(
        path
        for app in APPS
        for path in (ROOT / app).rglob("*")
        if path.suffix in SUFFIXES and "vendor" not in path.parts and "migrations" not in path.parts
    )


def test_the_pattern_finds_emoji() -> None:
    assert all(EMOJI.search(icon) for icon in ("✅", "❌", "⚠️", "⏸", "⏳", "🔒", "🟢"))
    assert not EMOJI.search("→ – — · ≥ ä ×")  # arrows, dashes and letters are text


def test_no_emoji_in_takts_templates_scripts_and_modules() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if EMOJI.search(line)
    ]
    assert len(sources()) > 100
    assert found == []
