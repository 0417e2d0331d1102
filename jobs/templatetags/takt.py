"""Template filters of the Takt admin pages: ``{% load takt %}`` then
``{{ run.started_at|takt_time }}``, ``{{ run.duration_s|takt_duration }}``,
``{{ run|takt_run_duration }}`` ("unknown" for a lost run),
``{{ run.status|takt_status }}``, ``{{ heartbeat.state|takt_state }}``
(see jobs/admin/display.py); ``{% takt_js_catalog %}`` loads the texts of
Takt's scripts in the reader's language (an admin class's Media takes
jobs/js_catalog.py's ``JS_CATALOG``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.admin import display
from jobs.js_catalog import js_catalog_url

register = template.Library()


@register.simple_tag
def takt_js_catalog() -> SafeString:
    """``<script src="…">`` of the catalogue (nothing without one)."""
    url = js_catalog_url()
    return format_html('<script src="{}"></script>', url) if url else format_html("")


@register.filter
def takt_time(value: datetime | None, precision: str = "second") -> SafeString:
    return display.time_html(value, seconds=precision != "minute")


@register.filter
def takt_time_relative(value: datetime | None) -> SafeString:
    return display.time_html(value, relative=True)


@register.filter
def takt_duration(value: Any) -> str:
    return display.duration_text(value)


@register.filter
def takt_run_duration(run: Any) -> str:
    """``{{ run|takt_run_duration }}``: "unknown" for a lost run."""
    return display.run_duration_text(run.status, run.duration_s)


@register.filter
def takt_status(value: str) -> SafeString:
    return display.status_badge(value)


@register.filter
def takt_state(value: str) -> SafeString:
    return display.state_badge(value)


@register.filter
def takt_text_times(value: str) -> SafeString:
    """A message with its UTC times shown in the browser's zone."""
    return display.times_in_text(value or "")
