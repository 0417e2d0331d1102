"""Bounds of an imported document (issue 25, "bounds everywhere"): YAML
anchors and aliases are refused outright, naming the line (559 bytes of
nested aliases expanded to 10⁷ values in the web request); a document
larger than TAKT_IMPORT_MAX_BYTES, with more values than
TAKT_IMPORT_MAX_NODES, or nested too deeply is refused; on the admin's
Import page, `import_jobs` and TAKT_JOBS_FILE alike, and nothing stored
changes."""

from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from jobs.declared import sync_declared_jobs
from jobs.models import Job
from runs.models import Run
from tests.integration.test_operations_admin import IMPORT_URL, NIGHTLY

pytestmark = pytest.mark.django_db


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": each level a list of ten aliases of the one
    before: 10**levels values from a few hundred bytes."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


ANCHORS_REFUSED = "line 1: YAML anchors and aliases (&name, *name) are not accepted"


def import_jobs(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("import_jobs", str(path), *args, stdout=out)
    return out.getvalue()


def test_import_jobs_refuses_the_alias_bomb_at_once_naming_the_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    assert len(path.read_bytes()) < 600
    jobs = Job.objects.count()

    started = time.monotonic()
    with pytest.raises(CommandError) as refused:
        import_jobs(path)
    assert time.monotonic() - started < 5
    assert str(refused.value) == f"nothing imported:\nfile: {ANCHORS_REFUSED}: write each value out"
    assert Job.objects.count() == jobs


def test_an_alias_further_down_is_refused_at_its_line(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "- key: a\n"
        "  name: A\n"
        "  target: tests.echo\n"
        "  params: {to: ops}\n"
        "- key: b\n"
        "  name: B\n"
        "  target: tests.echo\n"
        "  params: {<<: {to: ops}}\n"  # a merge key without an alias is plain YAML 1.1
        "- key: c\n"
        "  name: C\n"
        "  target: tests.echo\n"
        "  params: &shared {to: ops}\n"
    )
    with pytest.raises(CommandError, match=r"file: line 12: YAML anchors and aliases"):
        import_jobs(path, "--dry-run")


def test_the_admin_import_page_shows_the_refusal_and_offers_no_import(admin_client):
    started = time.monotonic()
    page = admin_client.post(IMPORT_URL, {"text": alias_bomb(), "format": "yaml", "check": "Check"})
    assert time.monotonic() - started < 5

    assert page.status_code == 200
    assert page.context["check"].problems == [f"file: {ANCHORS_REFUSED}: write each value out"]
    assert 'name="import"' not in page.content.decode()
    assert not Run.objects.exists()


@override_settings(TAKT_IMPORT_MAX_BYTES=1000)
def test_a_document_larger_than_the_cap_is_refused(tmp_path, admin_client):
    text = json.dumps([{**NIGHTLY, "description": ""}])
    at_cap = json.dumps([{**NIGHTLY, "description": "x" * (1000 - len(text))}])
    assert len(at_cap.encode()) == 1000
    path = tmp_path / "jobs.json"
    path.write_text(at_cap)
    assert "create     job 1" in import_jobs(path, "--dry-run")

    past = at_cap.replace('"description": "', '"description": "y', 1)  # one byte more
    path.write_text(past)
    with pytest.raises(
        CommandError, match=r"file: 1001 bytes: at most 1000 \(TAKT_IMPORT_MAX_BYTES\)"
    ):
        import_jobs(path)
    page = admin_client.post(IMPORT_URL, {"text": past, "format": "json", "check": "Check"})
    assert page.context["check"].problems == [
        "file: 1001 bytes: at most 1000 (TAKT_IMPORT_MAX_BYTES)"
    ]


@override_settings(TAKT_IMPORT_MAX_NODES=100)
@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("yaml", "[" + ", ".join(["1"] * 99) + "]", None),  # the list and 99 values: 100
        ("yaml", "[" + ", ".join(["1"] * 100) + "]", "line 1: more than 100 values"),
        ("yaml", "- x\n" * 100 + "- last\n", "line 100: more than 100 values"),  # the list: 1
        ("json", json.dumps([1] * 99), None),
        ("json", json.dumps([1] * 100), "more than 100 values"),
        ("json", json.dumps({str(i): i for i in range(50)}), "more than 100 values"),  # keys count
    ],
)
def test_a_document_with_more_values_than_the_cap_is_refused(tmp_path, fmt, text, message):
    path = tmp_path / f"values.{fmt}"
    path.write_text(text)
    if message is None:
        with pytest.raises(CommandError, match="expected a list of jobs|job 1"):
            import_jobs(path)  # read: then refused as jobs, not for its size
    else:
        with pytest.raises(CommandError, match=rf"file: {message} \(TAKT_IMPORT_MAX_NODES\)"):
            import_jobs(path)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_nesting_deeper_than_python_allows_is_refused(tmp_path, fmt):
    path = tmp_path / f"deep.{fmt}"
    path.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(CommandError, match="file: nested too deeply"):
        import_jobs(path)


def test_a_jobs_file_with_aliases_stops_the_sync_naming_the_line(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "nightly: &base\n  name: Nightly\n  target: tests.echo\nweekly:\n  <<: *base\n  name: W\n"
    )
    with (
        override_settings(TAKT_JOBS={}, TAKT_JOBS_FILE=str(path)),
        pytest.raises(ImproperlyConfigured, match=r"line 1: YAML anchors and aliases"),
    ):
        sync_declared_jobs(now=timezone.now())
    assert not Job.objects.filter(key__in=["nightly", "weekly"]).exists()


@override_settings(TAKT_MAX_PARAMS_BYTES=1024)
def test_an_import_larger_than_the_params_cap_still_starts_its_operation(admin_client):
    """The import operation carries its text in its run's params: Takt's
    own, bounded by TAKT_IMPORT_MAX_BYTES, not by TAKT_MAX_PARAMS_BYTES."""
    text = json.dumps([{**NIGHTLY, "description": "x" * 2000}])
    checked = admin_client.post(IMPORT_URL, {"text": text, "format": "json", "check": "Check"})
    assert checked.context["check"].ok
    admin_client.post(IMPORT_URL, {**checked.context["form"].initial, "import": "Import"})
    (run,) = Run.objects.filter(job__key="takt.operations")
    assert run.params["text"] == text
