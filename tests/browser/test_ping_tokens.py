"""A heartbeat's own ping token (issue 25) from the admin: the action "New
ping token" shows the token once, a ping to the web server with it is
recorded and one without it refused (DEBUG is on there, as under make run:
the heartbeat's own token is still required), and "Remove ping token"
takes it away."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import Page, expect

from heartbeats.models import Heartbeat
from tests.browser.pages import job_row, message, run_action

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEARTBEATS = "/admin/takt_heartbeats/heartbeat/"


def ping(web: str, name: str, token: str | None = None) -> int:
    """POST a success ping to the web server, as a cron job's curl would."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"{web}/api/v1/heartbeats/{name}", method="POST", headers=headers, data=b""
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_a_new_ping_token_is_shown_once_and_works_until_removed(page: Page, web: str):
    Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    page.goto(web + HEARTBEATS)

    run_action(page, "New ping token", job_row(page, "nightly-backup"))

    shown = message(page, "success")
    expect(shown).to_contain_text("Ping token of nightly-backup (shown only now")
    found = re.search(r"\): (\S+) — send it as", shown.inner_text())
    assert found, shown.inner_text()
    token = found.group(1)
    assert ping(web, "nightly-backup") == 401
    assert ping(web, "nightly-backup", token) == 200
    assert Heartbeat.objects.get(name="nightly-backup").run_count == 1

    run_action(page, "Remove ping token", job_row(page, "nightly-backup"))
    expect(message(page, "success")).to_have_text("Removed the ping token of 1 heartbeat.")
    assert ping(web, "nightly-backup", token) == 200  # DEBUG on, no token configured: open
    assert ping(web, "nightly-backup") == 200
