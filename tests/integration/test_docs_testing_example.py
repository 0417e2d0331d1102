"""test_nightly_report.py: a job of your own, tested without a worker or a
beat, on a Redis of the tests' own (docs/testing-your-jobs.md)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from jobs import takt_job
from jobs.models import Job, Trigger
from jobs.testing import fire_times

T0 = datetime(2027, 1, 4, 8, 0, tzinfo=UTC)


# The job under test; in your project it lives in an app's takt_jobs.py.
@takt_job("example.count_rows")
def count_rows(job):
    day = job.params.get("day", "yesterday")
    rows = job.params.get("rows", 0)  # your code would count them
    if rows < 0:
        raise ValueError(f"{rows} rows: the count went wrong")
    job.log(f"{day}: {rows} rows")
    return {"day": day, "rows": rows}


@pytest.fixture
def nightly(db):
    job = Job.objects.create(
        key="reports.nightly",
        name="Nightly report",
        target="example.count_rows",
        params={"rows": 42},
    )
    Trigger.objects.create(
        job=job, kind="cron", cron_expression="30 2 * * *", timezone="Europe/Berlin"
    )
    return job


def test_it_runs_inline_with_a_trigger_params_and_a_clock(nightly, takt):
    run = takt.run_inline(
        nightly, trigger="api", params={"day": "2027-01-03"}, now=[T0, T0 + timedelta(seconds=4)]
    )

    assert (run.status, run.trigger) == ("succeeded", "api")
    assert "2027-01-03: 42 rows" in run.output
    assert run.result == {"day": "2027-01-03", "rows": 42}
    assert (run.started_at, run.finished_at, run.duration_s) == (T0, T0 + timedelta(seconds=4), 4)


def test_a_failing_run_says_why(nightly, takt):
    run = takt.run_inline(nightly, params={"rows": -1}, now=T0)

    assert run.status == "failed"
    assert "-1 rows: the count went wrong" in run.message


def test_the_next_three_nights_cross_the_spring_change(nightly):
    # 02:30 does not exist in Berlin on 28 March 2027: the run comes at 03:00.
    assert fire_times(nightly, count=3, after="2027-03-26T12:00:00+01:00") == [
        "2027-03-27T02:30:00+01:00",
        "2027-03-28T03:00:00+02:00",
        "2027-03-29T02:30:00+02:00",
    ]


def test_a_cron_expression_in_a_zone():
    assert fire_times(
        "0 9 * * MON-FRI", count=2, timezone="America/New_York", after="2027-01-01T00:00:00-05:00"
    ) == ["2027-01-01T09:00:00-05:00", "2027-01-04T09:00:00-05:00"]


def test_the_beat_records_the_run_when_it_is_due(nightly, takt):
    due = nightly.triggers.get().next_run_at

    assert takt.tick(due - timedelta(seconds=1)) == []  # a second early: nothing
    (run,) = takt.tick(due, run=True)  # the beat's clock frozen at the fire time

    assert (run.trigger, run.scheduled_for, run.status) == ("schedule", due, "succeeded")
    assert takt.tick(due) == []  # each fire time once


def test_takt_uses_a_redis_of_the_tests_own(takt, takt_redis_url):
    assert settings.REDIS_URL == takt_redis_url
    assert settings.CELERY_BROKER_URL == takt_redis_url


# --- not part of the guide ---------------------------------------------------------

import re  # noqa: E402

from tests.fresh_project import make_project, python  # noqa: E402

GUIDE = settings.BASE_DIR / "docs" / "testing-your-jobs.md"
THIS_FILE = settings.BASE_DIR / "tests" / "integration" / "test_docs_testing_example.py"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_this_file_is_the_guides_example():
    """docs/testing-your-jobs.md shows this file, to the line above."""
    (shown,) = [b for b in _python_blocks(GUIDE.read_text()) if b.startswith('"""test_nightly')]
    own = THIS_FILE.read_text(encoding="utf-8")
    assert own.startswith(shown) and own[len(shown) :].startswith("\n\n# --- not part")


@pytest.mark.timeout(300)
def test_the_guides_example_passes_in_a_fresh_project(tmp_path):
    """The guide's conftest.py and example, as a user copies them into a
    project made by startproject with Takt's apps (tests/fresh_project.py),
    run with pytest there: every test of the example passes, without
    Takt's own suite around it (its conftest switches off the built-in
    maintenance job, its settings are Takt's own project's)."""
    blocks = _python_blocks(GUIDE.read_text())
    (conftest,) = [b for b in blocks if b.startswith("# conftest.py")]
    (example,) = [b for b in blocks if b.startswith('"""test_nightly_report.py')]
    site = make_project(tmp_path / "mysite")
    (site / "conftest.py").write_text(conftest)
    (site / "test_nightly_report.py").write_text(example)
    (site / "pytest.ini").write_text("[pytest]\nDJANGO_SETTINGS_MODULE = mysite.settings\n")

    out = python(site, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", timeout_s=240)

    count = len(re.findall(r"^def test_", example, flags=re.MULTILINE))
    assert re.search(rf"^{count} passed in ", out, flags=re.MULTILINE), out
