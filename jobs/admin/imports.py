"""The admin's "Import jobs" page and the start of long operations from
the job admin (F-74, F-93).

Import jobs (``<admin>/jobs/job/import/``, linked from the job list; users
with ``takt_jobs.add_job`` and ``takt_jobs.change_job``): upload a YAML or JSON file
in the export_jobs format, or paste it, and **Check**: the page shows the
dry-run plan at once, as ``import_jobs --dry-run`` prints it, or the
problems, each naming the job and the field. **Import** (offered once the
check passed, for exactly the text checked) starts the ``import_jobs``
operation, all or nothing, and shows its run. A file that would create or
change a job needing a capability the user lacks (a script job, a
command job …; jobs.capabilities) is refused naming the field.

`start_operation_view` is what the job admin's actions call to start an
operation (runs.operations.start_operation) and show its run's page;
`operation_form` the page such an action asks its values on first.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext

from jobs.capabilities import granted_to
from jobs.errors import InvalidInput, TaktError
from jobs.exchange import format_of
from jobs.importing import check_text, plan_lines, summary_line
from runs.operations import start_operation

INLINE_RUN_NOW_MAX = 20  # "Run now" on more selected jobs runs as an operation
MAX_IMPORT_BYTES = 2_000_000  # under Django's DATA_UPLOAD_MAX_MEMORY_SIZE: the text is posted back


def start_operation_view(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    kind: str,
    params: dict[str, Any],
    *,
    what: str,
    form: forms.Form | None = None,
) -> HttpResponse | None:
    """Start operation `kind` for the request's user and redirect to its
    run's page (with a message saying so, or that the same operation is
    already under way). Refused: the error goes on `form` (on the field it
    names, if the form has it) or into a message, and None is returned."""
    try:
        run = start_operation(kind, params, by=request.user.get_username(), now=timezone.now())
    except TaktError as exc:
        if form is None:
            modeladmin.message_user(
                request, _("%(what)s: %(error)s") % {"what": what, "error": exc}, messages.ERROR
            )
        elif isinstance(exc, InvalidInput) and exc.field in form.fields:
            form.add_error(exc.field, exc.message)
        else:
            form.add_error(None, str(exc))
        return None
    # The status badge's word ("queued", "eingereiht"), from the runs app's catalogue.
    status = pgettext("run status badge", str(run.status).replace("_", " "))
    said = {"what": what, "id": run.pk, "status": status, "message": run.message}
    if getattr(run, "deduplicated", False):
        text = _("%(what)s is already under way as run #%(id)s (%(status)s).") % said
        level = messages.WARNING
    elif run.status == "skipped":
        text, level = _("%(what)s was not started: %(message)s") % said, messages.ERROR
    else:
        text = _("%(what)s started as run #%(id)s: its progress shows here.") % said
        level = messages.SUCCESS
    modeladmin.message_user(request, text, level)
    return HttpResponseRedirect(reverse("admin:takt_runs_run_change", args=[run.pk]))


class ImportForm(forms.Form):
    file = forms.FileField(
        required=False,
        label=gettext_lazy("File"),
        help_text=gettext_lazy("A YAML or JSON file, as manage.py export_jobs writes it."),
    )
    text = forms.CharField(
        label=gettext_lazy("or paste it"),
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100, "spellcheck": "false"}),
    )
    format = forms.ChoiceField(
        choices=[
            ("", gettext_lazy("by the file name, else YAML")),
            ("yaml", "YAML"),
            ("json", "JSON"),
        ],
        required=False,
        label=gettext_lazy("Format"),
    )
    source = forms.CharField(required=False, widget=forms.HiddenInput)
    checked = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        """An uploaded file wins over the text field and becomes the text."""
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None:
            if upload.size > MAX_IMPORT_BYTES:
                self.add_error("file", _too_big())
                return data
            try:
                data["text"] = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                self.add_error("file", _("must be UTF-8 text (YAML or JSON)"))
                return data
            data["source"] = upload.name
        elif not (data.get("text") or "").strip():
            self.add_error("text", _("upload a file or paste the jobs here"))
            return data
        elif len(data["text"].encode()) > MAX_IMPORT_BYTES:
            self.add_error("text", _too_big())
            return data
        data["source"] = (data.get("source") or _("pasted text"))[:200]
        data["format"] = data.get("format") or format_of(data["source"], None)
        return data


def _too_big() -> str:
    return _("at most %(size)s MB") % {"size": MAX_IMPORT_BYTES // 1_000_000}


def _digest(text: str, fmt: str) -> str:
    return hashlib.sha256(f"{fmt}\n{text}".encode()).hexdigest()


def import_view(modeladmin: admin.ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    user = request.user
    if not (user.has_perm("takt_jobs.add_job") and user.has_perm("takt_jobs.change_job")):
        raise PermissionDenied
    form = ImportForm(request.POST or None, request.FILES or None)
    check = None
    if request.method == "POST" and form.is_valid():
        text, fmt, source = (form.cleaned_data[k] for k in ("text", "format", "source"))
        check = check_text(text, fmt, now=timezone.now(), granted=granted_to(user))
        digest = _digest(text, fmt)
        # Import only what was checked and shown: changed text is checked first.
        if "import" in request.POST and check.ok and form.cleaned_data["checked"] == digest:
            params = {"text": text, "format": fmt, "source": source}
            started = start_operation_view(
                modeladmin,
                request,
                "import_jobs",
                params,
                what=_("The import of %(source)s") % {"source": source},
            )
            if started is not None:
                return started
        elif "import" in request.POST and check.ok:
            changed = _("The jobs changed since the check: here is their plan; import again.")
            modeladmin.message_user(request, changed, messages.WARNING)
        initial = {"text": text, "format": fmt, "source": source, "checked": digest}
        form = ImportForm(initial=initial)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": _("Import jobs"),
        "opts": modeladmin.model._meta,
        "form": form,
        "check": check,
        "plan": "\n".join([*plan_lines(check.items), summary_line(check.items, dry_run=True)])
        if check is not None and check.ok
        else "",
    }
    return TemplateResponse(request, "admin/takt_jobs/job/import.html", context)


def import_urls(modeladmin: admin.ModelAdmin[Any]) -> list[URLPattern]:
    """For JobAdmin.get_urls (before the admin's own): ``import/``, named
    ``admin:takt_jobs_job_import``."""
    view = modeladmin.admin_site.admin_view(lambda request: import_view(modeladmin, request))
    return [path("import/", view, name="takt_jobs_job_import")]


def operation_form(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    form: forms.Form,
    *,
    action: str,
    title: str,
    intro: str,
    submit: str,
) -> HttpResponse:
    """The page an action that starts an operation asks its values on: the
    selected jobs, the form, the submit button (admin/takt_jobs/job/operation_form.html)."""
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "intro": intro,
        "submit": submit,
        "action": action,
        "opts": modeladmin.model._meta,
        "jobs": queryset,
        "form": form,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/takt_jobs/job/operation_form.html", context)
