"""A heartbeat's own ping token (issue 25): it lets a ping reach that one
outside heartbeat, where TAKT_PING_TOKEN reaches them all. Only its SHA-256
is stored (heartbeats.core.pings.token_digest): the token is shown once,
when it is issued (the admin's "New ping token" action)."""

from __future__ import annotations

import secrets

from django.utils.translation import gettext

from heartbeats.core.pings import is_process_name, token_digest
from heartbeats.models import Heartbeat


class NotPingable(ValueError):
    """A job's heartbeat or a Takt process's: neither is pinged."""


def issue_ping_token(heartbeat: Heartbeat) -> str:
    """Give the outside heartbeat a new ping token and return it; the one it
    had stops working at once. Raises NotPingable for a job's heartbeat or a
    Takt worker's or beat's."""
    if heartbeat.job_id is not None or is_process_name(heartbeat.name):
        message = gettext("%(name)s is not pinged: only outside heartbeats have a ping token")
        raise NotPingable(message % {"name": repr(heartbeat.name)})
    token = secrets.token_urlsafe(32)
    Heartbeat.objects.filter(pk=heartbeat.pk).update(ping_token_hash=token_digest(token))
    return token


def remove_ping_token(heartbeat_ids: list[int]) -> int:
    """Remove the heartbeats' own ping tokens (TAKT_PING_TOKEN still
    applies); returns how many had one."""
    return (
        Heartbeat.objects.filter(pk__in=heartbeat_ids)
        .exclude(ping_token_hash="")
        .update(ping_token_hash="")
    )
