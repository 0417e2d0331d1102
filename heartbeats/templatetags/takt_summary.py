"""``{% load takt_summary %}{% takt_landing as summary %}``: the data of the
Takt landing page (heartbeats/admin/summary.py); the filters
``takt_heartbeat_state`` and ``takt_severity`` show a heartbeat's state and
an alert's severity in the reader's language."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString

from heartbeats.admin.summary import landing_summary
from heartbeats.labels import severity_word
from jobs.admin import display

register = template.Library()


@register.simple_tag
def takt_landing() -> dict[str, Any]:
    return landing_summary(now=timezone.now())


@register.filter
def takt_heartbeat_state(value: str) -> SafeString:
    """``{{ heartbeat.state|takt_heartbeat_state }}``: the state's coloured
    badge with its word in the reader's language; the CSS class keeps the
    code (takt-state-down)."""
    return display.state_badge(value)


@register.filter
def takt_severity(value: str) -> str:
    """``{{ alert.severity|takt_severity }}``: the severity in the reader's language."""
    return severity_word(value)
