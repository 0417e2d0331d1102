"""API tokens: made by the command or the admin, shown once, stored hashed."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.tokens import ApiToken
from tests.integration.api_helpers import TokenClient, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"^takt_[0-9a-f]{8}_[A-Za-z0-9_-]{40,}$")


def test_create_api_token_prints_a_working_token_once() -> None:
    user_with("takt_jobs.view_job", username="reporter")
    out = StringIO()
    call_command("create_api_token", "--name", "reports", "--user", "reporter", stdout=out)
    text = out.getvalue().strip()
    assert TOKEN.match(text)
    stored = ApiToken.objects.get(name="reports")
    assert text not in (stored.token_hash, stored.token_id) and stored.matches(text)
    assert TokenClient(text).get("/api/v1/jobs").status_code == 200
    assert ApiToken.objects.get(pk=stored.pk).last_used_at is not None


def test_a_job_token_warns_while_the_job_is_closed_to_the_api() -> None:
    job = make_job("export")
    out, err = StringIO(), StringIO()
    call_command("create_api_token", "--name", "b", "--job", str(job.pk), stdout=out, stderr=err)
    assert TOKEN.match(out.getvalue().strip())
    assert "API trigger permission is 'off'" in err.getvalue()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--name", "x"], "--user, --job"),
        (["--name", "x", "--user", "ghost"], "--user"),
        (["--name", "x", "--job", "999999"], "--job"),
        (["--name", "x", "--user", "reporter", "--expires-in-days", "0"], "--expires-in-days"),
    ],
)
def test_create_api_token_refuses_bad_input(args: list[str], field: str) -> None:
    user_with(username="reporter")
    with pytest.raises(CommandError, match=re.escape(field)):
        call_command("create_api_token", *args)
    assert not ApiToken.objects.exists()


def test_the_admin_shows_a_new_token_once(client) -> None:  # type: ignore[no-untyped-def]
    admin = user_with(superuser=True, username="root")
    client.force_login(admin)
    response = client.post(
        "/admin/takt_jobs/apitoken/add/",
        {"name": "from admin", "user": admin.pk, "job": "", "expires_at_0": "", "expires_at_1": ""},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    [text] = [m.rsplit(" ", 1)[1] for m in messages if "not shown again" in m]
    assert TOKEN.match(text)
    assert ApiToken.objects.get(name="from admin").matches(text)
    page = client.get("/admin/takt_jobs/apitoken/").content.decode()
    assert "from admin" in page and text not in page
