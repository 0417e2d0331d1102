"""Alert e-mails through a real SMTP server (aiosmtpd, in a thread of the
test) on a free port: the settings come from EMAIL_URL as an operator
writes it (scheduler_project/mailconfig.py), Django's SMTP backend sends,
and the server sees the login, the sender, the recipients and the subject."""

from __future__ import annotations

import email
import email.policy
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from jobs.models import Job
from runs.execution import execute
from runs.models import RunStatus, RunTrigger
from runs.services import create_run
from scheduler_project.mailconfig import SMTP_BACKEND, email_settings
from tests.integration.conftest import SECOND, clock, make_job, utc
from tests.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)  # the mail goes after a real commit

T0 = utc(2026, 3, 2, 9, 0)


@dataclass
class Mailbox:
    """What the SMTP server received: (login, envelope sender, recipients, message)."""

    received: list[tuple[str | None, str, list[str], email.message.EmailMessage]] = field(
        default_factory=list
    )

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        login = session.auth_data.decode() if session.auth_data else None
        self.received.append((login, envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"


def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"takt", b"s3cr:t")
    return AuthResult(success=ok, handled=False, auth_data=data.login if ok else None)


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox, port = Mailbox(), free_port()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_require_tls=False,  # a local test server; production mail uses ?tls=1
    )
    controller.start()
    yield mailbox, port
    controller.stop()


def use_email(settings: Any, **environ: str) -> None:
    for name, value in email_settings(environ).items():
        setattr(settings, name, value)


def fail_once(job: Job) -> None:
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    execute(run.pk, worker="test", clock=clock(T0, T0 + SECOND))
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_the_alert_of_a_failed_run_arrives_by_smtp(settings, smtp_server, redis_client):
    mailbox, port = smtp_server
    use_email(
        settings,
        EMAIL_URL=f"smtp://takt:s3cr%3At@127.0.0.1:{port}/?timeout=5",
        DEFAULT_FROM_EMAIL="Takt <takt@example.com>",
    )
    settings.TAKT_ALERT_EMAILS = ["ops@example.com", "oncall@example.com"]
    settings.TAKT_ALERT_MIN_SEVERITY = "warning"

    fail_once(make_job("nightly", target="tests.fail"))

    [(login, sender, recipients, message)] = mailbox.received
    assert login == "takt"
    assert sender == "takt@example.com"
    assert recipients == ["ops@example.com", "oncall@example.com"]
    assert message["From"] == "Takt <takt@example.com>"
    assert message["To"] == "ops@example.com, oncall@example.com"
    assert message["Subject"] == "[Takt] Run 'nightly' failed (warning)"
    assert "Severity:   warning" in message.get_content()


def test_a_wrong_password_fails_nothing_but_the_mail(settings, smtp_server, redis_client, caplog):
    mailbox, port = smtp_server
    use_email(settings, EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port), EMAIL_HOST_USER="takt")
    settings.EMAIL_HOST_PASSWORD = "wrong"
    settings.EMAIL_BACKEND = SMTP_BACKEND  # Django's default; the test runner sets locmem
    settings.TAKT_ALERT_EMAILS = ["ops@example.com"]

    with caplog.at_level(logging.ERROR, logger="takt.heartbeats"):
        fail_once(make_job("nightly", target="tests.fail"))  # the run still ends as its job did

    assert mailbox.received == []
    assert "e-mail about alert run-failed:job:" in caplog.text
    assert "SMTPAuthenticationError" in caplog.text
