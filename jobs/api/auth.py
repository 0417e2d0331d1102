"""Who may call the API (F-41, F-42).

Two ways in: the admin's session cookie (writes need the CSRF token in
`X-CSRFToken`, or `X-CSRF-Token` as the spec spells it), or an API token
(`Authorization: Bearer takt_…`, see jobs.tokens). A user, by session or by
a user token, has Django's model permissions: `view_*` to read, `add_*`,
`change_*`, `delete_*` to write. A token scoped to a job, with or without
a user, may only start that job and read its runs; starting a job also
depends on the job's API trigger permission (jobs.api.views.JobViewSet.run).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from jobs.tokens import ApiToken, token_id_of

LAST_USED_EVERY = timedelta(minutes=1)


class CsrfHeaderAliasMiddleware:
    """Accept the CSRF token in `X-CSRF-Token` too (Django reads
    `X-CSRFToken`), so both spellings of the documented curl call work."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        alias = request.META.get("HTTP_X_CSRF_TOKEN")
        if alias and "HTTP_X_CSRFTOKEN" not in request.META:
            request.META["HTTP_X_CSRFTOKEN"] = alias
        return self.get_response(request)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>` (or `Token <token>`). A wrong,
    revoked or expired token is refused outright (401), never treated as
    anonymous. `request.auth` is the ApiToken."""

    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: expected 'Bearer <token>'")
        text = header[1]
        token_id = token_id_of(text)
        token = ApiToken.objects.select_related("user").filter(token_id=token_id).first()
        now = timezone.now()
        if token is None or not token.matches(text):
            raise exceptions.AuthenticationFailed("Authorization: unknown API token")
        if not token.usable(now=now):
            raise exceptions.AuthenticationFailed(
                "Authorization: the API token is revoked or expired"
            )
        if token.user is not None and not token.user.is_active:
            raise exceptions.AuthenticationFailed("Authorization: the token's user is inactive")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
            # Not a write per request: the last use to the minute is enough.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        # A token scoped to a job acts for nobody, also when it names a user:
        # it starts that job and reads its runs, nothing else (its user's
        # capabilities still bound what it may start, jobs.api.views).
        user = token.user if token.job_id is None and token.user is not None else AnonymousUser()
        return (user, token)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="takt"'


def job_token(request: Request) -> ApiToken | None:
    """The job-scoped token the request came with, if any."""
    auth = request.auth
    if isinstance(auth, ApiToken) and auth.job_id is not None:
        return auth
    return None


def is_user(request: Request) -> bool:
    return bool(request.user and request.user.is_authenticated)


def caller(request: Request) -> str:
    """Who makes the request, as a pause or a variable records it:
    ``<user> (API)``, or ``token <name> (API)`` for a token without a user."""
    if is_user(request):
        return f"{request.user.get_username()} (API)"
    return f"token {getattr(request.auth, 'name', '?')} (API)"


class ModelPermissions(permissions.DjangoModelPermissions):
    """Django's model permissions, reads included (`view_*`). A request
    with a job-scoped token and no user passes only where a view opts in
    with `job_token_actions` (the view then limits what it sees)."""

    perms_map = {
        **permissions.DjangoModelPermissions.perms_map,
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": [],
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        if job_token(request) is not None and not is_user(request):
            return getattr(view, "action", None) in getattr(view, "job_token_actions", ())
        if not is_user(request):
            return False
        action_perms = getattr(view, "action_perms", {})
        action = getattr(view, "action", None)
        if action in action_perms:
            return bool(request.user.has_perms(action_perms[action]))
        return super().has_permission(request, view)


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """How the served schema describes ApiTokenAuthentication."""

    target_class = "jobs.api.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "takt_… (manage.py create_api_token)",
        }
