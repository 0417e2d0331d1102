"""F-65, issue 29 B.7: the decision log is visible. The API
(`GET /api/v1/decisions`) filters by job, kind, since and until, refuses a
parameter it does not know, and needs takt_runs.view_schedulerdecision;
the admin lists every job's decisions with filters and shows a job's
latest ones in its editor, each time as a <time> for the browser's zone."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.test import Client

from runs.decisions import Decision, record
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import SECOND, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
URL = "/api/v1/decisions"
VIEW = "takt_runs.view_schedulerdecision"


@pytest.fixture(autouse=True)
def _redis(redis_client: Any) -> None:
    """Each test's private Redis, emptied."""


def some_decisions() -> tuple[int, int]:
    first, second = make_job("Import").pk, make_job("Export").pk
    record(
        [
            Decision("due", first, None, 1, "schedule run for 2026-06-01T08:00:00+00:00", T0),
            Decision("not_due", second, None, 2, "the queue is paused", T0 + SECOND),
            Decision("end", first, 5, None, "started ..., ended succeeded", T0 + 2 * SECOND),
            Decision("beat", 0, None, None, "beat started on h (pid 1): scheduling on", T0),
        ]
    )
    return first, second


def kinds(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [d["kind"] for d in response.json()["results"]]


def test_the_api_lists_the_decisions_newest_first_with_filters():
    first, second = some_decisions()
    client = TokenClient(make_token(user=user_with(VIEW)))

    answer = client.get(URL)
    assert kinds(answer) == ["beat", "end", "not_due", "due"]
    end = answer.json()["results"][1]
    assert datetime.fromisoformat(end["at"]) == T0 + 2 * SECOND  # in the server's zone, as runs
    assert end == {
        "id": end["id"],
        "at": end["at"],
        "kind": "end",
        "job": first,
        "run": 5,
        "trigger": None,
        "detail": "started ..., ended succeeded",
    }
    assert kinds(client.get(URL, job=first)) == ["end", "due"]
    assert kinds(client.get(URL, job=0)) == ["beat"]
    assert kinds(client.get(URL, kind=["due", "not_due"])) == ["not_due", "due"]
    assert kinds(client.get(URL, since="2026-06-01T08:00:01Z")) == ["end", "not_due"]
    # since inclusive, until exclusive, any offset
    assert kinds(client.get(URL, until="2026-06-01T10:00:01+02:00")) == ["beat", "due"]
    assert kinds(client.get(URL, job=second, since="2026-06-01T08:00:02Z")) == []


def test_the_api_refuses_what_it_does_not_know_and_whom_may_not_read():
    some_decisions()
    client = TokenClient(make_token(user=user_with(VIEW)))

    answer = client.get(URL, jobs=1)
    assert (answer.status_code, answer.json()) == (
        400,
        {"jobs": ["unknown field (did you mean 'job'?)"]},
    )
    answer = client.get(URL, colour="red")
    assert (answer.status_code, answer.json()) == (400, {"colour": ["unknown field"]})
    assert client.get(URL, kind="nap").status_code == 400
    assert client.get(URL, since="yesterday").status_code == 400
    assert client.get(URL, job="x").status_code == 400
    root = TokenClient(make_token(user=user_with(username="root", superuser=True), name="r"))
    assert root.send("post", URL, {}).status_code == 405
    assert root.get(URL + "/1").status_code == 404  # a list only

    no_view = TokenClient(make_token(user=user_with("takt_runs.view_run", username="u2")))
    assert no_view.get(URL).status_code == 403
    job_token = TokenClient(make_token(job=make_job("Scoped"), name="job"))
    assert job_token.get(URL).status_code == 403
    assert Client().get(URL).status_code in (401, 403)


def test_the_admin_lists_them_with_filters_and_the_job_editor_shows_its_own():
    first, second = some_decisions()
    admin = SessionClient(user_with(VIEW, "takt_jobs.view_job"))

    page = admin.get("/admin/takt_runs/schedulerdecision/").content.decode()
    for kind in ("due", "not_due", "end", "beat"):
        assert f'<td class="field-kind">{kind}</td>' in page
    assert '<time class="takt-time" datetime="2026-06-01T08:00:02Z"' in page
    assert "all jobs" in page

    page = admin.get("/admin/takt_runs/schedulerdecision/", kind="not_due").content.decode()
    assert page.count('<td class="field-kind">') == 1 and "the queue is paused" in page
    page = admin.get("/admin/takt_runs/schedulerdecision/", job=str(first)).content.decode()
    assert page.count('<td class="field-kind">') == 2
    at = {"at_from": "2026-06-01 08:00:01+00:00", "at_to": "2026-06-01 08:00:02+00:00"}
    page = admin.get("/admin/takt_runs/schedulerdecision/", **at).content.decode()
    assert page.count('<td class="field-kind">') == 1 and 'field-kind">not_due' in page

    editor = admin.get(f"/admin/takt_jobs/job/{first}/change/").content.decode()
    panel = editor.split('id="takt-decisions"')[1].split("</fieldset>")[0]
    assert panel.count("class='takt-decision'") == 2
    assert panel.index("ended succeeded") < panel.index("schedule run for")  # newest first
    # A time inside a detail is shown in the browser's zone too.
    assert panel.count('<time class="takt-time" datetime="2026-06-01T08:00:00Z"') == 2
    assert f"?job={first}" in panel


def test_without_the_permission_neither_the_list_nor_the_panel_shows():
    first, _second = some_decisions()
    admin = SessionClient(user_with("takt_runs.view_run", "takt_jobs.view_job"))
    assert admin.get("/admin/takt_runs/schedulerdecision/").status_code == 403
    editor = admin.get(f"/admin/takt_jobs/job/{first}/change/").content.decode()
    assert 'id="takt-decisions"' not in editor
