"""Script jobs in the job admin (F-02 `script`): the editor, its "Check"
and "Run now" buttons, and who may touch them.

* The `script` field is an ACE editor (django-ace: its files are served
  from the package, no CDN) in Python mode. Under it, **Check** compiles
  the editor's text without running it (``check-script/``, answering
  "compiles" or the error with its line and column, marked in the
  editor's gutter) and **Run now** starts a run of the saved job, as the
  page's Run now does (it runs the saved script: a changed editor says so).
* Only users with `write_scripts` (jobs.scripts.may_write_scripts) see "script" among the
  kinds, change or delete a script job, or run one (Run now, the action);
  others see a script job read-only.
* Every save and delete of a script is on the job's audit trail (F-120,
  jobs.audit), its History showing the script's diff.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST
from django_ace import AceWidget

from jobs.admin.panels import titled
from jobs.core.cron import TriggerError
from jobs.core.script import check_script
from jobs.js_catalog import JS_CATALOG
from jobs.models import Job
from jobs.policies import JobKind
from jobs.scripts import (
    SUPERUSERS_ONLY,
    may_write_scripts,
    touches_scripts,
)

SCRIPT_JS = "jobs/script_editor.js"


class ScriptEditor(AceWidget):
    """The ACE editor with the Check and Run now buttons under it."""

    def __init__(self, *, check_url: str = "", run_now_url: str = "", **kwargs: Any) -> None:
        super().__init__(
            mode="python",
            theme="chrome",
            width="100%",
            height="360px",
            useworker=False,  # Python mode has no worker: nothing to fetch
            showprintmargin=False,
            toolbar=False,
            tabsize=4,
            **kwargs,
        )
        self.check_url, self.run_now_url = check_url, run_now_url

    @property
    def media(self) -> Any:
        return super().media + forms.Media(js=[JS_CATALOG, SCRIPT_JS])

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> Any:
        editor = super().render(name, value, attrs, renderer)
        run_now = (
            format_html(
                '<button type="submit" class="button" formaction="{}" formnovalidate'
                ' title="{}">{}</button>',
                self.run_now_url,
                _("Run the saved script now (also when the job is disabled)"),
                _("Run now"),
            )
            if self.run_now_url
            else ""
        )
        return format_html(
            '<div class="takt-script-editor">{}<div class="takt-script-tools" data-check-url="{}">'
            '<button type="button" class="button takt-script-check" title="{}">{}</button> {}'
            ' <span class="takt-script-result" role="status" aria-live="polite"></span></div></div>',
            editor,
            self.check_url,
            _("Compile the script without running it"),
            _("Check"),
            run_now,
        )


class SourceField(forms.CharField):
    """A script's source as written (its last newline too), with the
    browser's CRLF line ends as LF."""

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        return value.replace("\r\n", "\n") if isinstance(value, str) else value


def script_summary(job: Job) -> str:
    """The Script section's heading: what it holds now."""
    if job.kind != JobKind.SCRIPT:
        return _("for script jobs only")
    lines = len((job.script or "").splitlines())
    if not lines:
        return _("no script yet")
    return ngettext("%(count)d line of Python", "%(count)d lines of Python", lines) % {
        "count": lines
    }


def script_fieldsets(job: Job, user: Any) -> tuple[Any, ...]:
    """The Script section: open for a script job (before the triggers, as
    a command job's Command section), folded for others; shown only to
    superusers, and read-only to others on a script job."""
    script = job.kind == JobKind.SCRIPT
    if not (script or may_write_scripts(user)):
        return ()
    classes = ("takt-leading",) if script else ("collapse",)
    return (
        (titled(_("Script"), script_summary(job)), {"classes": classes, "fields": ("script",)}),
    )


class ScriptAdmin:
    """The job admin's part for script jobs (see the module docstring)."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "script":
            kwargs.update(form_class=SourceField, strip=False)
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "kind" and not may_write_scripts(request.user):
            choices = kwargs.get("choices", db_field.choices)
            kwargs["choices"] = [c for c in choices if c[0] != JobKind.SCRIPT]
        return super().formfield_for_choice_field(db_field, request, **kwargs)  # type: ignore[misc]

    def get_form(self, request: HttpRequest, obj: Job | None = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)  # type: ignore[misc]
        if "script" in form.base_fields:
            run_now = (
                reverse("admin:takt_jobs_job_run_now", args=[obj.pk])
                if obj is not None and obj.kind == JobKind.SCRIPT
                else ""
            )
            form.base_fields["script"].widget = ScriptEditor(
                check_url=reverse("admin:takt_jobs_job_check_script"), run_now_url=run_now
            )
        return form

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and obj.kind == JobKind.SCRIPT and not may_write_scripts(request.user):
            return False
        return bool(super().has_change_permission(request, obj))  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and obj.kind == JobKind.SCRIPT and not may_write_scripts(request.user):
            return False
        return bool(super().has_delete_permission(request, obj))  # type: ignore[misc]

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        """Refuse a script job to anyone but a superuser (the kind's choices
        already leave it out)."""
        stored = Job.objects.filter(pk=obj.pk).values_list("kind", flat=True).first()
        if touches_scripts(stored, obj.kind) and not may_write_scripts(request.user):
            raise PermissionDenied(_(SUPERUSERS_ONLY))
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        scripts = list(queryset.filter(kind=JobKind.SCRIPT))
        if scripts and not may_write_scripts(request.user):
            raise PermissionDenied(_(SUPERUSERS_ONLY))
        super().delete_queryset(request, queryset)  # type: ignore[misc]

    def scripts_refused(self, request: HttpRequest, jobs: QuerySet[Job] | list[Job]) -> bool:
        """For "Run now": True, with an error message, when `jobs` holds a
        script job and the user is not a superuser."""
        names = [str(job) for job in jobs if job.kind == JobKind.SCRIPT]
        if not names or may_write_scripts(request.user):
            return False
        self.message_user(  # type: ignore[attr-defined]
            request,
            _("%(refusal)s: %(jobs)s. Nothing was started.")
            % {"refusal": _(SUPERUSERS_ONLY), "jobs": ", ".join(names)},
            messages.ERROR,
        )
        return True

    def script_urls(self) -> list[URLPattern]:
        """``check-script/`` (POST `script`), named ``admin:takt_jobs_job_check_script``."""
        site = self.admin_site  # type: ignore[attr-defined]
        view = site.admin_view(require_POST(check_script_view))
        return [path("check-script/", view, name="takt_jobs_job_check_script")]


def check_script_view(request: HttpRequest) -> HttpResponse:
    """Compile the posted `script` without running it: {"ok": true,
    "message": "compiles"}, or {"ok": false, "message": …, "line": L,
    "column": C} (line and column when it is a syntax error)."""
    if not may_write_scripts(request.user):
        raise PermissionDenied(_(SUPERUSERS_ONLY))
    source = request.POST.get("script", "")
    try:
        check_script(source)
    except TriggerError as exc:
        where = _where(source)
        return JsonResponse({"ok": False, "message": exc.message, **where})
    return JsonResponse({"ok": True, "message": _("compiles")})


def _where(source: str) -> dict[str, int]:
    try:
        compile(source, "<script>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return {"line": exc.lineno or 0, "column": exc.offset or 0}
    except ValueError:
        pass
    return {}
