"""Filters and paging for the run list that stay fast with 1,000,000 runs
(F-51): a job filter you type into (a sidebar listing 100,000 jobs would
not do), date ranges, held runs by what they wait for, a concurrency
group's runs, and a paginator that counts at most COUNT_CAP runs instead
of the whole table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from jobs.input_zone import zone_note
from jobs.models import ConcurrencyGroup, Job
from runs.models import RunStatus, WaitingFor

COUNT_CAP = 10_000
JOB_MATCHES = 1000  # jobs a name filter may stand for


class CappedPaginator(Paginator):
    """Counts at most COUNT_CAP + 1 rows (`SELECT COUNT(*) FROM (… LIMIT n)`):
    a page of the newest runs never waits for a count of every run.
    `capped` says whether there are more than COUNT_CAP."""

    @cached_property
    def count(self) -> int:  # type: ignore[override]
        queryset: QuerySet[Any] = self.object_list
        n = queryset.order_by()[: COUNT_CAP + 1].count()
        self.capped = n > COUNT_CAP
        return min(n, COUNT_CAP)

    capped = False


class InputFilter(admin.SimpleListFilter):
    """A filter you type into; `template` renders a small GET form that
    keeps the list's other parameters."""

    template = "admin/takt/input_filter.html"
    placeholder = ""

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("", "")]  # always shown

    def note(self) -> str:
        """Shown after the input."""
        return ""

    def choices(self, changelist: Any) -> Any:
        others = [
            (key, value)
            for key, value in changelist.get_filters_params().items()
            if key != self.parameter_name
        ]
        flat = [
            (k, v)
            for k, values in others
            for v in (values if isinstance(values, list) else [values])
        ]
        if changelist.query:
            flat.append(("q", changelist.query))
        yield {
            "parameter": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "note": self.note(),
            "hidden": flat,
            "clear": changelist.get_query_string(remove=[self.parameter_name]),
        }


class JobFilter(InputFilter):
    title = _("job (id or part of its name)")
    parameter_name = "job"
    placeholder = _("e.g. 17 or nightly")

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        if value.isdigit():
            return queryset.filter(job_id=int(value))
        ids = list(
            Job.objects.filter(name__icontains=value).values_list("pk", flat=True)[:JOB_MATCHES]
        )
        return queryset.filter(job_id__in=ids)


RANGES = {
    "1h": (_("Past hour"), timedelta(hours=1)),
    "24h": (_("Past 24 hours"), timedelta(days=1)),
    "7d": (_("Past 7 days"), timedelta(days=7)),
    "30d": (_("Past 30 days"), timedelta(days=30)),
}


class EnqueuedFilter(admin.SimpleListFilter):
    title = _("enqueued")
    parameter_name = "enqueued"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        return [(key, label) for key, (label, _span) in RANGES.items()]

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = RANGES.get(self.value() or "")
        if chosen is None:
            return queryset
        return queryset.filter(enqueued_at__gte=timezone.now() - chosen[1])


class BoundFilter(InputFilter):
    """Runs enqueued from (or before) a date or an ISO 8601 time; without
    an offset, read in the request's zone (jobs/input_zone.py: the
    browser's), which the note after the input names."""

    lookup = "enqueued_at__gte"
    placeholder = _("YYYY-MM-DD [HH:MM]")

    def note(self) -> str:
        return zone_note()

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        moment = parse_moment(self.value() or "", end=self.lookup.endswith("lt"))
        return queryset if moment is None else queryset.filter(**{self.lookup: moment})


class EnqueuedFromFilter(BoundFilter):
    title = _("enqueued from")
    parameter_name = "enqueued_from"


class EnqueuedToFilter(BoundFilter):
    title = _("enqueued before")
    parameter_name = "enqueued_to"
    lookup = "enqueued_at__lt"


def parse_moment(raw: str, *, end: bool = False) -> datetime | None:
    """A date (its start; with `end`, the start of the next day) or a date
    and time; None for empty or unreadable input."""
    raw = raw.strip().replace(" ", "T", 1)
    if not raw:
        return None
    moment = parse_datetime(raw)
    if moment is None:
        day = parse_date(raw)
        if day is None:
            return None
        moment = datetime.combine(day + timedelta(days=1 if end else 0), datetime.min.time())
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


# F-31, F-34: held runs by what they wait for (Run.waiting_for); "job" is
# a run held behind its job's running run (an overlap policy) or the
# paused queue.
WAITING = {
    "group": (_("for a slot of its group"), {"waiting_for": WaitingFor.GROUP}),
    "exclusive": (_("for the exclusive slot"), {"waiting_for": WaitingFor.EXCLUSIVE}),
    "limit": (_("for the global limit"), {"waiting_for": WaitingFor.LIMIT}),
    "job": (_("for its job or the queue"), {"waiting_for": WaitingFor.NOTHING}),
}


class WaitingFilter(admin.SimpleListFilter):
    """Held runs (queued, not sent) by what they wait for: the run_active
    index's queued runs, so cheap however many runs there are."""

    title = _("held, waiting")
    parameter_name = "waiting"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        return [(key, label) for key, (label, _filter) in WAITING.items()]

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = WAITING.get(self.value() or "")
        if chosen is None:
            return queryset
        return queryset.filter(status=RunStatus.QUEUED, held=True, **chosen[1])


class GroupFilter(admin.SimpleListFilter):
    """The runs of the jobs in one concurrency group (F-31); shown once a
    group exists."""

    title = _("concurrency group")
    parameter_name = "group"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(pk), name) for pk, name in ConcurrencyGroup.objects.values_list("pk", "name")]

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value() or ""
        if not value.isdigit():
            return queryset
        jobs = Job.objects.filter(concurrency_group_id=int(value)).values("pk")
        return queryset.filter(job_id__in=jobs)
