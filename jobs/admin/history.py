"""The admin's side of the audit trail (F-120): every write through an
audited model's admin is recorded as from the admin, by the signed-in
user, with the note typed under the form (`_audit_note`); the object's
History page (Django's "History" button) lists its entries with the
fields before and after (jobs.history), in place of Django's one-line
LogEntry."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from jobs import audit
from jobs.admin.display import time_html
from jobs.history import entries_for

NOTE_FIELD = "_audit_note"
PER_PAGE = 50


def _recorded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def recorded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        note = request.POST.get(NOTE_FIELD, "") if request.method == "POST" else ""
        with audit.recording(audit.Source.ADMIN, user=request.user, note=note.strip()):
            return view(request, *args, **kwargs)

    return recorded


class AuditedAdmin:
    """Mixed in first by the admin of every audited model."""

    def get_urls(self) -> list[Any]:
        """Every view of this admin (its own ones too: the queue's buttons,
        a job's actions) records its writes as from the admin."""
        return [
            URLPattern(p.pattern, _recorded(p.callback), p.default_args, p.name)
            if isinstance(p, URLPattern)
            else p
            for p in super().get_urls()  # type: ignore[misc]
        ]

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
