"""Clients for the API tests: a user logged in through the admin's session
(so writes need the CSRF token, as from a browser or curl with a cookie
jar), and API tokens."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission, User
from django.test import Client

from jobs.models import Job
from jobs.tokens import ApiToken


def user_with(*perms: str, username: str = "operator", superuser: bool = False) -> User:
    user = User.objects.create_user(username, password="pw-" + username, is_staff=True)
    if superuser:
        user.is_superuser = True
        user.save()
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


class SessionClient:
    """Logs in with the admin's login form; sends X-CSRFToken from the cookie
    on writes (unless csrf=False), as the docs' curl example does."""

    def __init__(self, user: User, *, header: str = "X-CSRFToken") -> None:
        self.client = Client(enforce_csrf_checks=True)
        login = self.client.get("/admin/login/")
        token = login.cookies["csrftoken"].value
        response = self.client.post(
            "/admin/login/",
            {
                "username": user.username,
                "password": "pw-" + user.username,
                "csrfmiddlewaretoken": token,
            },
        )
        assert response.status_code == 302, response.content
        self.header = header

    def _csrf(self) -> dict[str, str]:
        return {self.header: self.client.cookies["csrftoken"].value}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params)

    def send(
        self, method: str, path: str, body: Any = None, *, csrf: bool = True, **headers: str
    ) -> Any:
        extra = {**(self._csrf() if csrf else {}), **headers}
        return getattr(self.client, method)(
            path, body if body is not None else {}, content_type="application/json", headers=extra
        )


class TokenClient:
    def __init__(self, token: str) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.auth = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params, headers=self.auth)

    def send(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        return getattr(self.client, method)(
            path,
            body if body is not None else {},
            content_type="application/json",
            headers={**self.auth, **headers},
        )


def make_token(*, user: User | None = None, job: Job | None = None, name: str = "t") -> str:
    token = ApiToken(name=name, user=user, job=job)
    text = token.issue()
    token.save()
    return text
