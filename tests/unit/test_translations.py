"""The German catalogues (docs/translation.md): every */locale/de/LC_MESSAGES/*.po
in the repository is complete (no empty msgstr, no fuzzy entry), its .mo says
the same as the .po (compiled after the last edit), and each translation keeps
the placeholders of its msgid (%(name)s and {name}), so German word order never
loses a value. Plain Python: no gettext tools needed."""

from __future__ import annotations

import ast
import gettext
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CATALOGUES = sorted(
    p
    for p in ROOT.glob("*/locale/de/LC_MESSAGES/*.po")
    if ".venv" not in p.parts and "node_modules" not in p.parts
)
# Partial catalogues to merge into django.po / djangojs.po (msgcat) would
# have no .mo of their own; none is left.
PARTIAL: set[str] = set()


@dataclass
class Entry:
    msgid: str = ""
    msgctxt: str | None = None
    msgid_plural: str | None = None
    msgstr: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    line: int = 0


def parse_po(path: Path) -> list[Entry]:
    """The entries of a .po file (obsolete #~ entries left out)."""
    entries: list[Entry] = []
    entry = Entry()
    current: str | None = None
    index = 0

    def flush() -> None:
        nonlocal entry
        if current is not None:
            entries.append(entry)
        entry = Entry()

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            flush()
            current = None
            continue
        if line.startswith("#,"):
            entry.flags |= {f.strip() for f in line[2:].split(",")}
            continue
        if line.startswith("#"):
            continue
        match = re.match(r"^(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d+)\])? (\".*\")$", line)
        if match:
            current, index = match.group(1), int(match.group(2) or 0)
            text = ast.literal_eval(match.group(3))
            if current == "msgid":
                entry.line = number
        elif line.startswith('"') and current is not None:
            text = ast.literal_eval(line)
        else:
            raise AssertionError(f"{path}:{number}: cannot read {raw!r}")
        if current == "msgstr":
            while len(entry.msgstr) <= index:
                entry.msgstr.append("")
            entry.msgstr[index] += text
        elif current == "msgid":
            entry.msgid += text
        elif current == "msgid_plural":
            entry.msgid_plural = (entry.msgid_plural or "") + text
        elif current == "msgctxt":
            entry.msgctxt = (entry.msgctxt or "") + text
    flush()
    return entries


def placeholders(text: str) -> list[str]:
    """Named %-placeholders, {name} placeholders and plain %s/%d, sorted."""
    named = re.findall(r"%\((\w+)\)[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGc]", text)
    braces = re.findall(r"(?<!\{)\{(\w*)\}(?!\})", text)
    plain = re.findall(r"%[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGc]", re.sub(r"%\(\w+\)|%%", "", text))
    return sorted([f"%({n})" for n in named] + [f"{{{b}}}" for b in braces] + plain)


def messages(path: Path) -> list[Entry]:
    return [e for e in parse_po(path) if e.msgid]


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_there_are_german_catalogues():
    names = {str(p.relative_to(ROOT)) for p in CATALOGUES}
    assert "jobs/locale/de/LC_MESSAGES/django.po" in names


@pytest.mark.parametrize("path", CATALOGUES, ids=ids(CATALOGUES))
def test_every_entry_is_translated_and_none_is_fuzzy(path):
    header = [e for e in parse_po(path) if not e.msgid]
    assert header and "fuzzy" not in header[0].flags, f"{path}: the header is fuzzy"
    assert "Language: de" in header[0].msgstr[0]
    problems = [
        f"line {e.line}: {e.msgid!r}"
        + (" is fuzzy" if "fuzzy" in e.flags else " is not translated")
        for e in messages(path)
        if "fuzzy" in e.flags or not e.msgstr or any(not s for s in e.msgstr)
    ]
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", CATALOGUES, ids=ids(CATALOGUES))
def test_translations_keep_the_placeholders_of_their_msgid(path):
    problems = []
    for e in messages(path):
        wanted = placeholders(e.msgid)
        for i, text in enumerate(e.msgstr):
            source = e.msgid_plural if e.msgid_plural and i > 0 else e.msgid
            wanted = placeholders(source)
            got = placeholders(text)
            # A singular may say "one" instead of its count; never a new one.
            ok = got == wanted or (e.msgid_plural is not None and set(got) <= set(wanted))
            if text and not ok:
                problems.append(f"line {e.line}: {e.msgid!r}: {wanted} != {got} in {text!r}")
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


COMPILED = [p for p in CATALOGUES if p.name not in PARTIAL]


@pytest.mark.parametrize("path", COMPILED, ids=ids(COMPILED))
def test_the_mo_file_is_compiled_from_the_po_file(path):
    """compilemessages ran after the last edit: the .mo holds exactly the
    .po's translations (compare contents, not times: a checkout sets both)."""
    mo = path.with_suffix(".mo")
    assert mo.exists(), f"{mo.relative_to(ROOT)} is missing: run compilemessages"
    with mo.open("rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    expected: dict[object, str] = {}
    for e in messages(path):
        if "fuzzy" in e.flags:
            continue
        key = e.msgid if e.msgctxt is None else f"{e.msgctxt}\x04{e.msgid}"
        if e.msgid_plural is None:
            expected[key] = e.msgstr[0]
        else:
            for i, text in enumerate(e.msgstr):
                expected[(key, i)] = text
    compiled = {k: v for k, v in catalog.items() if k != ""}
    stale = sorted(str(k) for k in set(expected) ^ set(compiled))
    stale += sorted(str(k) for k in expected if k in compiled and compiled[k] != expected[k])
    assert not stale, (
        f"{mo.relative_to(ROOT)} is out of date (run compilemessages -l de): {stale[:5]}"
    )


def test_placeholders_are_found():
    assert placeholders("Started %(n)d runs: {links} %s") == ["%(n)", "%s", "{links}"]
    assert placeholders('must be a JSON object, e.g. {"name": "value"}') == []
    assert placeholders("100%% done") == []
