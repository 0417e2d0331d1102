"""The job admin's part of least privilege (jobs.capabilities,
docs/security.md).

* A user offered the kinds, targets and trigger kinds his capabilities
  allow: "command" only with `run_programs`, "script" only with
  `write_scripts` (jobs/admin/scripts.py), a file trigger only with
  `watch_folders`; a target naming a Celery task or `takt.remote_run` is
  refused on `target` without its permission, and a Celery task's `args`
  are shown only to whom may set them. The Command section is not shown
  to a user who may not run programs.
* A job that needs a capability the user lacks is read-only to him (the
  editor shows it, nothing can be saved) and cannot be deleted or run.
* "Run now" (the action and the editor's button) and "Backfill" refuse,
  with a message naming the job and the permission, a job the user may
  not run, and the built-in operations job.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.utils.translation import gettext as _

from jobs import capabilities
from jobs.capabilities import FOLDERS, PROGRAMS, TASKS, holds
from jobs.models import Job
from jobs.policies import JobKind, TriggerKind, reserved_target


def lacking_for(user: Any, job: Job | None) -> list[capabilities.Capability]:
    """The capabilities the stored `job` needs that `user` lacks."""
    return capabilities.missing(user, capabilities.needed_by_job(job))


class CapabilityAdmin:
    """Mixed into JobAdmin before ScriptAdmin (see the module docstring)."""

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "kind" and not holds(request.user, PROGRAMS):
            choices = kwargs.get("choices", db_field.choices)
            kwargs["choices"] = [c for c in choices if c[0] != JobKind.COMMAND]
        return super().formfield_for_choice_field(db_field, request, **kwargs)  # type: ignore[misc]

    def capability_fieldsets(self, request: HttpRequest, obj: Job | None, fieldsets: Any) -> Any:
        """`fieldsets` without what the user may not set: without
        `run_programs` no Command section (unless the job is a command job,
        shown read-only); without `run_celery_tasks` no `args` (unless the
        job has some)."""
        job = obj or Job()
        user = request.user
        hide: set[str] = set()
        if not holds(user, PROGRAMS) and job.kind != JobKind.COMMAND:
            hide.add("command")
        if not holds(user, TASKS) and not job.args:
            hide.add("args")
        if not hide:
            return fieldsets
        kept = []
        for title, options in fieldsets:
            fields = options.get("fields", ())
            if "command" in hide and "command" in fields:
                continue
            fields = tuple(f for f in fields if f not in hide)
            kept.append((title, {**options, "fields": fields}))
        return tuple(kept)

    def get_form(self, request: HttpRequest, obj: Job | None = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)  # type: ignore[misc]
        user = request.user

        class CapabilityForm(form):  # type: ignore[misc, valid-type]
            def clean(self) -> Any:
                data = super().clean()
                kind = data.get("kind", self.instance.kind)
                target = data.get("target", self.instance.target) or ""
                if kind == JobKind.CALLABLE and reserved_target(target):
                    self.add_error(
                        "target", _("%(target)r is Takt's or Celery's own") % {"target": target}
                    )
                    return data
                needed = capabilities.needed(kind, target)
                for capability in capabilities.missing(user, needed):
                    field = capability.field if capability.field in self.fields else None
                    self.add_error(field, capabilities.refusal_text(capability))
                return data

        # The fields as the admin made them (widgets, choices), not anew.
        CapabilityForm.base_fields = form.base_fields
        CapabilityForm.__name__ = form.__name__
        return CapabilityForm

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and lacking_for(request.user, obj):
            return False
        return bool(super().has_change_permission(request, obj))  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and lacking_for(request.user, obj):
            return False
        return bool(super().has_delete_permission(request, obj))  # type: ignore[misc]

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        """The last word: whatever the form offered, a job that needs a
        capability the user lacks, before or after, is not saved."""
        stored = Job.objects.filter(pk=obj.pk).first() if obj.pk else None
        needed = capabilities.needed(obj.kind, obj.target) | capabilities.needed_by_job(stored)
        lacking = capabilities.missing(request.user, needed)
        if lacking:
            raise PermissionDenied(capabilities.one_line(lacking))
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def runs_refused(self, request: HttpRequest, jobs: list[Job]) -> bool:
        """For "Run now" and "Backfill": True, with an error message, when
        `jobs` holds one the user may not start runs of."""
        problems = []
        for job in jobs:
            if reserved_target(job.target or "") and job.kind == JobKind.CALLABLE:
                problems.append(
                    _("%(job)s: runs only when Takt starts it (%(target)s)")
                    % {"job": job, "target": job.target}
                )
                continue
            lacking = capabilities.missing(request.user, capabilities.needed_to_start(job))
            if lacking:
                problems.append(f"{job}: {capabilities.one_line(lacking)}")
        if not problems:
            return False
        self.message_user(  # type: ignore[attr-defined]
            request,
            _("Nothing was started: %(problems)s") % {"problems": "; ".join(problems)},
            messages.ERROR,
        )
        return True


class TriggerCapabilities:
    """Mixed into TriggerInline: a file trigger only with `watch_folders`."""

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "kind" and not holds(request.user, FOLDERS):
            choices = kwargs.get("choices", db_field.choices)
            kwargs["choices"] = [c for c in choices if c[0] != TriggerKind.FILE]
        return super().formfield_for_choice_field(db_field, request, **kwargs)  # type: ignore[misc]
