"""The admin for API tokens (F-41, F-42): make one (its text is shown once,
in the confirmation message), see when each was last used, revoke.

No token grants more than its maker holds (docs/security.md):

* a user token acts for its user: only a superuser makes one for another
  user; others make theirs, for themselves;
* a job token starts its job: its maker must be allowed to change that
  job, with every capability it needs (jobs.capabilities);
* the user and job of a saved token, and un-revoking one, are a
  superuser's to change; anyone who may change tokens may revoke one."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from jobs import audit
from jobs.admin.display import LocalTimes
from jobs.admin.history import AuditedAdmin
from jobs.admin.lookups import refuse_regex_lookups
from jobs.models import Job
from jobs.tokens import PREFIX, ApiToken


@admin.register(ApiToken)
@refuse_regex_lookups
class ApiTokenAdmin(AuditedAdmin, LocalTimes, admin.ModelAdmin):
    change_form_template = "admin/takt/audited_change_form.html"
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

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is None or request.user.is_superuser:
            return fields
        return (*fields, "user", "job", *(("revoked",) if obj.revoked else ()))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model()._default_manager.filter(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request: HttpRequest, obj: ApiToken | None = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)
        user, job_admin = request.user, self.admin_site._registry.get(Job)

        class TokenForm(form):  # type: ignore[misc, valid-type]
            def clean(self) -> Any:
                data = super().clean()
                if user.is_superuser or self.instance.pk is not None:
                    return data
                owner, job = data.get("user"), data.get("job")
                if owner is not None and owner.pk != user.pk:
                    self.add_error("user", _("only a superuser makes a token for another user"))
                if job is not None and not (
                    job_admin is not None and job_admin.has_change_permission(request, job)
                ):
                    self.add_error(
                        "job",
                        _(
                            "you may not change this job (or it needs a permission you do not"
                            " have): a token for it would start what you may not"
                        ),
                    )
                return data

        TokenForm.base_fields = form.base_fields  # as the admin made them
        TokenForm.__name__ = form.__name__
        return TokenForm

    @admin.action(description=gettext_lazy("Revoke the selected tokens"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        with transaction.atomic():
            ids = list(queryset.values_list("pk", flat=True))
            n = queryset.update(revoked=True)
            audit.record_updated(ApiToken, ids)
        self.message_user(
            request,
            ngettext("%(count)d token revoked.", "%(count)d tokens revoked.", n) % {"count": n},
        )
