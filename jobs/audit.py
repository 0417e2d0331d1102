"""The audit trail of every change of a job, trigger, concurrency group,
result variable, holiday calendar, API token and the queue's switches
(F-120), kept by django-simple-history (why that library:
docs/operations.md#who-changed-what-f-120).

Each audited model has `history = audited(...)`: a historical table that
gets a row, with all of the model's fields but the ones the beat and the
workers keep (`excluded`), at every create, save and delete, in the
writer's transaction. Besides simple-history's own `history_user`,
`history_date`, `history_type` and `history_change_reason` (the
operator's optional note), a row says where the change came from
(`audit_source`: admin, api, command, sync, or code when no entry point
said) and who in words (`audit_by`: a user name, ``token <name> (API)``,
``manage.py <command>``).

Entry points say who and from where with `recording(...)`, a context
manager over a context variable: the admin (jobs.admin.history), the API
(jobs.api.base.TaktApi), the management commands that write and the sync
of jobs declared in code (jobs.declared). The innermost one wins, so the
sync a command starts is recorded as the sync. Writes by
`QuerySet.update()` (the queue's compare-and-set switches) send no
signal; they call `record_updated` after the update, in its transaction:
the queue's switches, a job's pause, resume, enable and disable (also the
beat's and a run's: by "beat (the pause ended)", "takt"), a token's
revocation, a variable set by hand. A run's own writes (its result code,
counters, next fire times) are bookkeeping, not changes, and stay out.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.management.base import BaseCommand
from django.db import models
from django.dispatch import receiver
from django.utils.translation import pgettext_lazy
from simple_history.models import HistoricalRecords
from simple_history.signals import pre_create_historical_record


class Source(models.TextChoices):
    ADMIN = "admin", pgettext_lazy("audit", "admin")
    API = "api", pgettext_lazy("audit", "API")
    COMMAND = "command", pgettext_lazy("audit", "management command")
    SYNC = "sync", pgettext_lazy("audit", "config-as-code sync")
    CODE = "code", pgettext_lazy("audit", "code")


NOTE_MAX_LENGTH = 2000  # the longest note kept (the API refuses a longer one)


@dataclass
class Context:
    """Who writes, from where, and the operator's note (mutable: the API
    learns who only once it has authenticated the request, and the note
    once it has read the body)."""

    source: str = Source.CODE
    by: str = ""
    user: Any = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_context: ContextVar[Context | None] = ContextVar("takt_audit_context", default=None)


def current() -> Context:
    """The innermost `recording` context, or one that says "code"."""
    return _context.get() or Context()


@contextmanager
def recording(source: str, *, by: str = "", user: Any = None, note: str = "") -> Iterator[Context]:
    """Record every audited write inside as coming from `source`, by
    `user` (a Django user, or None) and `by` (words: the user's name when
    not given), with `note`. Yields the context, which the caller may
    complete (`by`, `user`, `note`) before the writes."""
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    if not by and user is not None:
        by = user.get_username()
    token = _context.set(Context(source=source, by=by, user=user, note=note))
    try:
        yield _context.get()  # type: ignore[misc]
    finally:
        _context.reset(token)


@contextmanager
def noting(note: str) -> Iterator[None]:
    """The current context with `note` for the writes inside."""
    token = _context.set(replace(current(), note=note))
    try:
        yield
    finally:
        _context.reset(token)


class AuditFields(models.Model):
    """What Takt adds to each historical row."""

    audit_source = models.CharField(
        pgettext_lazy("audit", "source"), max_length=16, choices=Source.choices, default=Source.CODE
    )
    audit_by = models.CharField(pgettext_lazy("audit", "by"), max_length=200, blank=True)

    class Meta:
        abstract = True


def _user(instance: Any = None, request: Any = None, **_: Any) -> Any:
    return current().user


class TaktHistory(HistoricalRecords):
    """simple-history's HistoricalRecords, kept on the model (`_takt_history`)
    so that `record_now` can write a row after an `update()`."""

    def contribute_to_class(self, cls: Any, name: str) -> None:
        super().contribute_to_class(cls, name)
        cls._takt_history = self


def audited(*, excluded: list[str] | None = None) -> HistoricalRecords:
    """The history of a model (class attribute `history`), without the
    fields in `excluded` (kept by the beat or the workers, or secret). The
    note is a text column of any length; rows stay when their object is
    deleted."""
    return TaktHistory(
        bases=[AuditFields],
        excluded_fields=excluded or [],
        get_user=_user,
        cascade_delete_history=False,
        history_change_reason_field=models.TextField(null=True, blank=True),
    )


@receiver(pre_create_historical_record, dispatch_uid="takt.jobs.audit")
def _fill(sender: Any, *, history_instance: Any, **_: Any) -> None:
    context = current()
    history_instance.audit_source = context.source
    history_instance.audit_by = (context.by or "")[:200]
    if not history_instance.history_change_reason and context.note:
        history_instance.history_change_reason = context.note[:NOTE_MAX_LENGTH]


def record_now(instance: models.Model, *, kind: str = "~") -> None:
    """A row for `instance` as it is now (read it again after an
    `update()`): `kind` "+" created, "~" changed, "-" deleted."""
    records: TaktHistory = type(instance)._takt_history  # type: ignore[attr-defined]
    records.create_historical_record(instance, kind)


def record_updated(
    model: type[models.Model], ids: list[int], *, by: str = "", note: str = ""
) -> None:
    """A row for each object of `model` in `ids` as it is now, after an
    `update()` (which sends no signal), in the caller's transaction. `by`
    and `note` stand in when the entry point said none (a run, the beat;
    the pause's own note)."""
    context = current()
    by, note = context.by or by, context.note or note
    with recording(context.source, by=by, user=context.user, note=note):
        for instance in model._default_manager.filter(pk__in=ids).order_by("pk"):
            record_now(instance)


def history_of(model: type[models.Model]) -> Any:
    """The historical model of an audited model."""
    return model.history.model  # type: ignore[attr-defined]


class AuditedCommand(BaseCommand):
    """The base of every management command that writes audited objects:
    its writes are recorded as from a command, by ``manage.py <name>
    (<OS user>)``."""

    def execute(self, *args: Any, **options: Any) -> Any:
        name = type(self).__module__.rsplit(".", 1)[-1]
        by = f"manage.py {name} ({getpass.getuser()})"
        with recording(Source.COMMAND, by=by):
            return super().execute(*args, **options)
