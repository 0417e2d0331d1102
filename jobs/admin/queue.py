"""The queue page (F-92): the cluster's queue switch and maintenance mode
with their notes, each live beat with its scheduler switch (as the beats
report it), the live workers, the active and queued counts and the next
scheduled run; buttons to pause (with a note and an end), resume, and
switch maintenance mode, through the services the API and the commands
use (runs.queue)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from redis import RedisError

from heartbeats.queue_status import queue_status  # the admin is glue over all three apps
from jobs.admin.display import ADMIN_CSS, ADMIN_JS, LocalTimes
from jobs.admin.history import AuditedAdmin
from jobs.admin.lookups import refuse_regex_lookups
from jobs.input_zone import ZonedDateTimeInput, typed_text
from jobs.js_catalog import JS_CATALOG
from jobs.models import QueueState
from runs import queue
from runs.connectivity import redis_unreachable_message


class PauseForm(forms.Form):
    note = forms.CharField(
        required=False,
        label=gettext_lazy("Note"),
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=gettext_lazy("Why."),
    )
    until = forms.DateTimeField(
        required=False,
        label=gettext_lazy("Resume by itself at"),
        widget=ZonedDateTimeInput(),
        help_text=gettext_lazy("Optional (YYYY-MM-DD HH:MM)."),
    )

    def clean_until(self) -> Any:
        until = self.cleaned_data.get("until")
        if until is not None and until <= timezone.now():
            # In the zone it was typed in (jobs/input_zone.py).
            raise forms.ValidationError(_("%(at)s is in the past") % {"at": typed_text(until)})
        return until


class MaintenanceForm(forms.Form):
    note = forms.CharField(
        required=False,
        label=gettext_lazy("Note"),
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=gettext_lazy("Why."),
    )


@admin.register(QueueState)
@refuse_regex_lookups
class QueueStateAdmin(AuditedAdmin, LocalTimes, admin.ModelAdmin):
    """ "Queue" in the admin index opens the queue page instead of a list."""

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            return HttpResponseRedirect(reverse("admin:index"))
        pause_form, maintenance_form = PauseForm(), MaintenanceForm()
        if request.method == "POST":
            if not self.has_change_permission(request):
                self.message_user(request, _("You may not change the queue."), messages.ERROR)
                return self._back()
            done = self._act(request)
            if done is None:
                return self._back()
            pause_form, maintenance_form = done
        context = {
            **self.admin_site.each_context(request),
            "title": _("Queue"),
            "opts": self.model._meta,
            "status": queue_status(now=timezone.now()),
            "pause_form": pause_form,
            "maintenance_form": maintenance_form,
            "can_change": self.has_change_permission(request),
            "media": self.media,
        }
        return TemplateResponse(request, "admin/takt_jobs/queue.html", context)

    def change_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._back()

    def _back(self) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:takt_jobs_queuestate_changelist"))

    def _act(self, request: HttpRequest) -> tuple[PauseForm, MaintenanceForm] | None:
        """One button's service; None when done, else the forms with errors."""
        now, by = timezone.now(), request.user.get_username()
        action = request.POST.get("action", "")
        try:
            if action == "pause":
                form = PauseForm(request.POST)
                if not form.is_valid():
                    return form, MaintenanceForm()
                data = form.cleaned_data
                changed = queue.pause_queue(note=data["note"], by=by, until=data["until"], now=now)
                self.message_user(
                    request, _("Queue paused.") if changed else _("The queue was paused already.")
                )
            elif action == "resume":
                changed = queue.resume_queue(now=now)
                self.message_user(
                    request, _("Queue resumed.") if changed else _("The queue was not paused.")
                )
            elif action in ("maintenance_on", "maintenance_off"):
                on = action == "maintenance_on"
                note = request.POST.get("note", "") if on else ""
                queue.set_maintenance(on, note=f"{note} ({by})".strip() if on else "", now=now)
                self.message_user(
                    request, _("Maintenance mode on.") if on else _("Maintenance mode off.")
                )
            else:
                self.message_user(
                    request, _("Unknown action %(action)r.") % {"action": action}, messages.ERROR
                )
        except RedisError as exc:
            self.message_user(request, redis_unreachable_message(exc), messages.ERROR)
        return None
