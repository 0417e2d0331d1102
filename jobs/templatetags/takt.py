"""Template filters of the Takt admin pages: ``{% load takt %}`` then
``{{ run.started_at|takt_time }}``, ``{{ run.duration_s|takt_duration }}``,
``{{ run|takt_run_duration }}`` ("unknown" for a lost run),
``{{ run.status|takt_status }}``, ``{{ heartbeat.state|takt_state }}``
(see jobs/admin/display.py); ``{% takt_js_catalog %}`` loads the texts of
Takt's scripts in the reader's language (``JS_CATALOG``, for an admin
class's Media)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms, template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.admin import display

register = template.Library()

# jobs/urls.py's JavaScript catalogue (Django's JavaScriptCatalog, domain djangojs).
JS_CATALOG_URL_NAME = "takt-jsi18n"


def js_catalog_url() -> str:
    """The address of the catalogue of Takt's script texts; "" where the
    project did not include jobs.urls (the scripts then speak English)."""
    try:
        return reverse(JS_CATALOG_URL_NAME)
    except NoReverseMatch:
        return ""


class CatalogScript(forms.Script):
    """The catalogue as a Media script: its address is looked up when the
    page is drawn (no script tag where there is none)."""

    def __init__(self) -> None:
        super().__init__(JS_CATALOG_URL_NAME)

    @property
    def path(self) -> str:
        return js_catalog_url()

    def __str__(self) -> str:
        return super().__str__() if self.path else ""


# For an admin class's Media: js = (JS_CATALOG, *ADMIN_JS).
JS_CATALOG = CatalogScript()


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
