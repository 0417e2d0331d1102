"""The admin's side of the audit trail (F-120): every write through an
audited model's admin is recorded as from the admin, by the signed-in
user, with the note typed under the form (`_audit_note`); the object's
History page (Django's "History" button) lists its entries with the
fields before and after (jobs.history), in place of Django's one-line
LogEntry."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from jobs import audit
from jobs.admin.display import time_html
from jobs.history import entries_for

NOTE_FIELD = "_audit_note"
PER_PAGE = 50


class AuditedAdmin:
    """Mixed in first by the admin of every audited model."""

    def _recording(self, request: HttpRequest) -> Any:
        note = request.POST.get(NOTE_FIELD, "") if request.method == "POST" else ""
        return audit.recording(audit.Source.ADMIN, user=request.user, note=note.strip())

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with self._recording(request):
            return super().changeform_view(request, *args, **kwargs)  # type: ignore[misc, no-any-return]

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with self._recording(request):
            return super().delete_view(request, *args, **kwargs)  # type: ignore[misc, no-any-return]

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with self._recording(request):  # the list's actions
            return super().changelist_view(request, *args, **kwargs)  # type: ignore[misc, no-any-return]

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], **kwargs: Any
    ) -> Any:
        context["audit_note_field"] = NOTE_FIELD
        return super().render_change_form(request, context, **kwargs)  # type: ignore[misc]

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        model = self.model  # type: ignore[attr-defined]
        obj = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if obj is None:
            raise Http404(
                _("No %(name)s with the id %(id)r.")
                % {"name": model._meta.verbose_name, "id": object_id}
            )
        if not self.has_view_or_change_permission(request, obj):  # type: ignore[attr-defined]
            raise PermissionDenied
        page = Paginator(entries_for(model, obj.pk), PER_PAGE).get_page(request.GET.get("p"))
        for entry in page:
            entry.at_html = time_html(entry.at)  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request),  # type: ignore[attr-defined]
            "title": _("History: %s") % obj,
            "subtitle": None,
            "module_name": str(capfirst(model._meta.verbose_name_plural)),
            "object": obj,
            "opts": model._meta,
            "page": page,
            "sources": dict(audit.Source.choices),
            "media": self.media,  # type: ignore[attr-defined]
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/takt/audit_history.html", context)
