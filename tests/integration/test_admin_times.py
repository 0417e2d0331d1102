"""Every Takt admin shows its date-times as jobs/admin/display.py does (a
<time> in the browser's zone with its abbreviation) and says beside each
one typed in which zone it is read in (F-121): the rule lives in one base,
LocalTimes, which every Takt ModelAdmin and inline has first, so a new
date-time field is shown that way without anyone remembering it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db import models
from django.test import RequestFactory
from django.urls import reverse

from heartbeats.models import Alert, Heartbeat
from jobs.admin.display import LocalTimes
from jobs.input_zone import ZonedSplitDateTime
from jobs.models import Job
from tests.integration.conftest import make_job

TAKT_APPS = ("takt_jobs", "takt_runs", "takt_heartbeats")


def takt_admins() -> list[admin.options.BaseModelAdmin]:
    admin.autodiscover()  # as the URLs do when first loaded
    found: list[admin.options.BaseModelAdmin] = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label in TAKT_APPS:
            found.append(model_admin)
            found.extend(inline(model, admin.site) for inline in model_admin.inlines)
    return found


def date_time_names(model: type[models.Model]) -> set[str]:
    return {f.name for f in model._meta.fields if isinstance(f, models.DateTimeField)}


@pytest.fixture
def superuser_request(admin_user):
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    return request


@pytest.mark.django_db
def test_every_takt_admin_shows_its_date_times_in_the_browsers_zone(superuser_request):
    admins = takt_admins()
    assert len(admins) >= 10
    job = make_job("Nightly")
    for model_admin in admins:
        name = type(model_admin).__name__
        assert isinstance(model_admin, LocalTimes), f"{name} is not a LocalTimes"
        times = date_time_names(model_admin.model)
        listed = (
            set(model_admin.get_list_display(superuser_request))
            if isinstance(model_admin, admin.ModelAdmin)
            else set()
        )
        assert not listed & times, f"{name} lists {listed & times} as Django prints them"
        obj = job if model_admin.model is Job else None
        shown = set(flatten_fieldsets(model_admin.get_fieldsets(superuser_request, obj)))
        editable = {f.name for f in model_admin.model._meta.fields if f.editable}
        readonly = set(model_admin.get_readonly_fields(superuser_request, obj))
        printed = shown & times & (readonly | (times - editable))
        assert not printed, f"{name} shows {printed} as Django prints them"


@pytest.mark.django_db
def test_every_date_time_typed_in_says_its_zone(superuser_request):
    for model_admin in takt_admins():
        for db_field in model_admin.model._meta.fields:
            if isinstance(db_field, models.DateTimeField) and db_field.editable:
                field = model_admin.formfield_for_dbfield(db_field, superuser_request)
                assert isinstance(field.widget, ZonedSplitDateTime), (
                    f"{type(model_admin).__name__}.{db_field.name}"
                )


@pytest.mark.django_db
def test_the_heartbeat_and_alert_pages_show_times_as_the_admin_does(admin_client):
    seen = datetime(2026, 1, 15, 12, 0, 5, tzinfo=UTC)
    beat = Heartbeat.objects.create(name="nightly-backup", deadline_s=60, last_run_at=seen)
    times = dict.fromkeys(("first_seen_at", "last_seen_at", "resolved_at"), seen)
    alert = Alert.objects.create(
        key="k",
        severity="warning",
        title="Backup late",
        message="since 2026-01-15T12:00:05Z",
        **times,
    )
    admin_client.cookies["takt_time_zone"] = "America/New_York"
    pages = [
        reverse("admin:takt_heartbeats_heartbeat_changelist"),
        reverse("admin:takt_heartbeats_heartbeat_change", args=[beat.pk]),
        reverse("admin:takt_heartbeats_alert_changelist"),
        reverse("admin:takt_heartbeats_alert_change", args=[alert.pk]),
    ]
    for url in pages:
        page = admin_client.get(url).content.decode()
        assert 'datetime="2026-01-15T12:00:05Z"' in page, url
        assert "2026-01-15 07:00:05 EST</time>" in page, url  # without JavaScript too
        assert "Jan. 15, 2026" not in page and "12:00 p.m." not in page, url
    assert "since <time" in page  # the alert's message: its time too
