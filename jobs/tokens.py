"""API tokens (F-41, F-42): a secret sent as `Authorization: Bearer <token>`.

A token either acts for a user (with that user's model permissions), or is
scoped to one job, with or without a user: then it may only start that job
(when the job's API trigger permission admits tokens, and while its user,
if any, holds the capabilities the job needs) and read that job's runs.
That is how another Takt installation triggers a job here without an
account. Who may make which token: jobs/admin/tokens.py.

Only a SHA-256 of the secret is stored; the secret is shown once, when the
token is made (`manage.py create_api_token`, or the admin). Tokens look like
`takt_<8-character id>_<secret>`; the id finds the row, the hash is compared
in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.audit import audited

PREFIX = "takt_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiToken(models.Model):
    name = models.CharField(
        _("name"), max_length=100, help_text=_("What it is for, e.g. 'nightly ETL on host-b'.")
    )
    token_id = models.CharField(_("token id"), max_length=8, unique=True, editable=False)
    token_hash = models.CharField(_("token hash"), max_length=64, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="takt_api_tokens",
        help_text=_("Acts as this user, with the user's permissions."),
    )
    job = models.ForeignKey(
        "takt_jobs.Job",
        verbose_name=_("job"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        help_text=_("Scoped to this job: may start it and read its runs, nothing else."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    expires_at = models.DateTimeField(
        _("expires at"), null=True, blank=True, help_text=_("Empty: never expires.")
    )
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True, editable=False)
    revoked = models.BooleanField(_("revoked"), default=False)

    history = audited(excluded=["token_hash", "last_used_at"])

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False) | models.Q(job__isnull=False),
                name="apitoken_user_or_job",
            )
        ]

    def __str__(self) -> str:
        scope = f"job #{self.job_id}" if self.job_id else f"user {self.user}"
        return f"{self.name} ({PREFIX}{self.token_id}…, {scope})"

    def clean(self) -> None:
        if self.user_id is None and self.job_id is None:
            raise ValidationError({"user": _("choose a user, a job, or both")})

    def usable(self, *, now: datetime) -> bool:
        return not self.revoked and (self.expires_at is None or self.expires_at > now)

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token_hash, _digest(token))

    def issue(self) -> str:
        """Give this (unsaved) token a fresh secret; return the token text,
        which is not stored and cannot be shown again."""
        self.token_id = secrets.token_hex(4)
        token = f"{PREFIX}{self.token_id}_{secrets.token_urlsafe(32)}"
        self.token_hash = _digest(token)
        return token


def token_id_of(token: str) -> str | None:
    """The id part of `takt_<id>_<secret>`, or None for text of another shape."""
    if not token.startswith(PREFIX):
        return None
    token_id, sep, secret = token[len(PREFIX) :].partition("_")
    if len(token_id) != 8 or not sep or not secret:
        return None
    return token_id
