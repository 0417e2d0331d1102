"""The admin for API tokens (F-41, F-42): make one (its text is shown once,
in the confirmation message), see when each was last used, revoke."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from jobs.admin.lookups import refuse_regex_lookups
from jobs.tokens import PREFIX, ApiToken


@admin.register(ApiToken)
@refuse_regex_lookups
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "shown_id",
        "user",
        "job",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked",
    )
    list_filter = ("revoked",)
    search_fields = ("name", "token_id", "user__username", "job__name")
    fields = (
        "name",
        "user",
        "job",
        "expires_at",
        "revoked",
        "shown_id",
        "created_at",
        "last_used_at",
    )
    readonly_fields = ("shown_id", "created_at", "last_used_at")
    raw_id_fields = ("job",)
    actions = ["revoke"]

    @admin.display(description=gettext_lazy("Token starts with"))
    def shown_id(self, obj: ApiToken) -> str:
        return f"{PREFIX}{obj.token_id}_…" if obj.token_id else _("(shown once, when saved)")

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        text = obj.issue() if not change else None
        super().save_model(request, obj, form, change)
        if text:
            self.message_user(
                request,
                _("The token (copy it now, it is not shown again): %(token)s") % {"token": text},
                messages.WARNING,
            )

    @admin.action(description=gettext_lazy("Revoke the selected tokens"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        n = queryset.update(revoked=True)
        self.message_user(
            request,
            ngettext("%(count)d token revoked.", "%(count)d tokens revoked.", n) % {"count": n},
        )
