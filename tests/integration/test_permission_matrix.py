"""The permission matrix (docs/security.md): every admin page and API
endpoint, tried by a staff user holding each single permission, answers
only what that permission names.

* Every model page of the admin (its list and its add form) for each
  permission of Takt's models: the list opens with `view_<model>` or
  `change_<model>`, the add form with `add_<model>`, and nothing else
  opens them.
* Every custom admin page (Run now, import, the operations page, …) is
  listed here with the permission it needs: a page added without an entry
  fails `test_every_custom_admin_page_is_in_the_matrix`.
* Every list endpoint of the API: 200 with its `view_*`, 403 with any
  other single permission, 401/403 without a login.
* Every writing endpoint of the API: 403 for each single permission it
  does not name, and not refused to the permissions it names.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from jobs.models import Job
from runs.models import RunStatus, RunTrigger
from runs.services import create_run

pytestmark = pytest.mark.django_db

TAKT_APPS = ("takt_jobs", "takt_runs", "takt_heartbeats")
STANDARD = ("changelist", "add", "history", "delete", "change", "autocomplete")

# Custom admin pages: URL name -> (method, arguments, the permissions that
# open it; any one of a tuple's entries suffices, "a+b" needs both). A POST
# refused with a redirect (Run now, Cancel) must have done nothing.
REDIRECTED = {"takt_jobs_job_run_now", "takt_runs_run_cancel", "takt_runs_run_rerun"}
CUSTOM: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "takt_jobs_job_run_now": ("post", "job", ("takt_jobs.change_job",)),
    "takt_jobs_job_check_script": ("post", "", ("takt_jobs.write_scripts",)),
    "takt_jobs_job_import": ("get", "", ("takt_jobs.add_job+takt_jobs.change_job",)),
    "takt_jobs_job_timeline": ("get", "", ("takt_jobs.view_job",)),
    "takt_jobs_job_timeline_data": ("get", "", ("takt_jobs.view_job",)),
    "takt_jobs_job_forecast": ("get", "", ("takt_jobs.view_job",)),
    "takt_jobs_job_forecast_data": ("get", "", ("takt_jobs.view_job",)),
    "takt_runs_run_live": ("get", "run", ("takt_runs.view_run",)),
    "takt_runs_run_cancel": ("post", "run", ("takt_runs.cancel_run",)),
    "takt_runs_run_rerun": ("post", "run", ("takt_jobs.change_job+takt_runs.view_run",)),
    "takt_heartbeats_operations": (
        "get",
        "",
        ("takt_heartbeats.view_heartbeat+takt_heartbeats.view_alert",),
    ),
    "takt_heartbeats_alerts_seen": ("post", "", ("takt_heartbeats.change_alert",)),
}


def takt_permissions() -> list[str]:
    return sorted(
        f"{p.content_type.app_label}.{p.codename}"
        for p in Permission.objects.filter(content_type__app_label__in=TAKT_APPS).select_related(
            "content_type"
        )
    )


def staff_with(perms: tuple[str, ...], name: str) -> Client:
    user = User.objects.create_user(name, password="x", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


def takt_model_admins() -> list[tuple[Any, admin.ModelAdmin[Any]]]:
    get_resolver().url_patterns  # the admin's modules load with the URLconf  # noqa: B018
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in TAKT_APPS
    ]


def opens(response: Any) -> bool:
    """The page was served (not refused, not sent to the login)."""
    return response.status_code == 200


def test_every_model_page_opens_only_with_its_own_permissions() -> None:
    wrong = []
    for n, perm in enumerate(takt_permissions()):
        client = staff_with((perm,), f"u{n}")
        for model, model_admin in takt_model_admins():
            meta = model._meta
            label = f"{meta.app_label}.%s_{meta.model_name}"
            url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
            may_list = perm in (label % "view", label % "change")
            if opens(client.get(url)) != may_list:
                wrong.append(
                    f"{perm}: the list of {meta.label} {'refused' if may_list else 'opened'}"
                )
            add = f"admin:{meta.app_label}_{meta.model_name}_add"
            try:
                add_url = reverse(add)
            except Exception:  # noqa: BLE001 - a model admin without an add form
                continue
            may_add = perm == label % "add" and model_admin.has_add_permission(_request_for(perm))
            if opens(client.get(add_url)) != may_add:
                wrong.append(
                    f"{perm}: the add form of {meta.label} {'refused' if may_add else 'opened'}"
                )
    assert wrong == []


def _request_for(perm: str) -> Any:
    """A request whose user holds `perm` (for has_add_permission)."""
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    user = User.objects.get(user_permissions__codename=perm.split(".")[1], username__startswith="u")
    request.user = user
    return request


def custom_admin_pages() -> dict[str, str]:
    """URL name -> pattern of every admin page a Takt model admin adds."""
    names: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str = "") -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and pattern.name:
                if not pattern.name.endswith(tuple(f"_{s}" for s in STANDARD)):
                    names[pattern.name] = prefix + str(pattern.pattern)

    for _model, model_admin in takt_model_admins():
        walk(model_admin.get_urls())
    return names


def test_every_custom_admin_page_is_in_the_matrix() -> None:
    assert sorted(set(custom_admin_pages()) - set(CUSTOM)) == []


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_a_custom_admin_page_opens_only_with_its_permission(name: str) -> None:
    method, argument, needed = CUSTOM[name]
    job = Job.objects.create(name="j", target="tests.echo")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())
    args = {"job": [job.pk], "run": [run.pk]}.get(argument, [])
    url = reverse(f"admin:{name}", args=args)
    answered = []
    for n, perm in enumerate(takt_permissions()):
        if any(perm in group.split("+") for group in needed):
            continue
        status = getattr(staff_with((perm,), f"p{n}"), method)(url).status_code
        if status != 403 and not (status == 302 and name in REDIRECTED):
            answered.append(f"{perm}: {status}")
    assert answered == [], f"{name} answered without its permission"
    # Nothing was done by those it refused.
    assert list(job.runs.values_list("status", flat=True)) == [RunStatus.QUEUED]
    for group in needed:
        client = staff_with(tuple(group.split("+")), "holder")
        response = getattr(client, method)(url)
        assert response.status_code != 403, f"{name} refused {group}"
        User.objects.filter(username="holder").delete()


API_LISTS = {
    "/api/v1/jobs": "takt_jobs.view_job",
    "/api/v1/runs": "takt_runs.view_run",
    "/api/v1/groups": "takt_jobs.view_concurrencygroup",
    "/api/v1/variables": "takt_jobs.view_resultvariable",
    "/api/v1/heartbeats": "takt_heartbeats.view_heartbeat",
    "/api/v1/alerts": "takt_heartbeats.view_alert",
    "/api/v1/queue": "takt_jobs.view_queuestate",
    "/api/v1/decisions": "takt_runs.view_schedulerdecision",
}


def test_every_api_list_answers_only_its_view_permission() -> None:
    anonymous = Client()
    wrong = []
    for path in API_LISTS:
        if anonymous.get(path).status_code not in (401, 403):
            wrong.append(f"anonymous: {path}")
    for n, perm in enumerate(takt_permissions()):
        client = staff_with((perm,), f"a{n}")
        for path, needed in API_LISTS.items():
            status = client.get(path).status_code
            if (status == 200) != (perm == needed):
                wrong.append(f"{perm}: {path} answered {status}")
    assert wrong == []


# Every writing endpoint of the API: (method, path, body, the permissions
# it needs, all of them). Job ids and the like are filled in per request.
API_WRITES = [
    ("post", "/api/v1/jobs", {"name": "m", "target": "tests.echo"}, {"takt_jobs.add_job"}),
    ("patch", "/api/v1/jobs/{job}", {"name": "m2"}, {"takt_jobs.change_job"}),
    ("delete", "/api/v1/jobs/{job}", None, {"takt_jobs.delete_job"}),
    ("post", "/api/v1/jobs/{job}/pause", {}, {"takt_jobs.change_job"}),
    ("post", "/api/v1/jobs/{job}/resume", None, {"takt_jobs.change_job"}),
    ("post", "/api/v1/queue/pause", {}, {"takt_jobs.change_queuestate"}),
    ("post", "/api/v1/queue/resume", None, {"takt_jobs.change_queuestate"}),
    ("post", "/api/v1/queue/maintenance", {"on": False}, {"takt_jobs.change_queuestate"}),
    ("post", "/api/v1/groups", {"name": "g", "limit": 1}, {"takt_jobs.add_concurrencygroup"}),
    ("post", "/api/v1/variables", {"name": "v"}, {"takt_jobs.add_resultvariable"}),
    (
        "patch",
        "/api/v1/heartbeats/{heartbeat}",
        {"deadline_s": 60},
        {"takt_heartbeats.change_heartbeat"},
    ),
    ("post", "/api/v1/alerts/{alert}/seen", None, {"takt_heartbeats.change_alert"}),
    ("post", "/api/v1/runs/{run}/cancel", None, {"takt_runs.view_run", "takt_runs.cancel_run"}),
]


def write_targets(n: int = 0) -> tuple[Job, dict[str, int]]:
    from heartbeats.models import Alert, Heartbeat

    now = timezone.now()
    job = Job.objects.create(name="j", target="tests.echo")
    return job, {
        "job": job.pk,
        "run": create_run(job, trigger=RunTrigger.MANUAL, now=now).pk,
        "heartbeat": Heartbeat.objects.create(name=f"outside-{n}", deadline_s=3600).pk,
        "alert": Alert.objects.create(
            key=f"k{n}", title="t", message="m", severity="warning", first_seen_at=now,
            last_seen_at=now,
        ).pk,
    }  # fmt: skip


@pytest.mark.parametrize("write", API_WRITES, ids=lambda w: f"{w[0]} {w[1]}")
def test_an_api_write_is_open_to_the_permissions_it_names(write: Any) -> None:
    from tests.integration.api_helpers import TokenClient, make_token

    method, path, body, needed = write
    _job, ids = write_targets()
    user = User.objects.create_user("holder", is_staff=True)
    for perm in needed:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    status = TokenClient(make_token(user=user)).send(method, path.format(**ids), body).status_code
    assert status not in (401, 403), f"{method.upper()} {path} refused {sorted(needed)}: {status}"


def test_every_api_write_is_refused_to_a_single_permission_it_does_not_name() -> None:
    from tests.integration.api_helpers import TokenClient, make_token

    job, ids = write_targets()
    wrong = []
    for n, perm in enumerate(takt_permissions()):
        user = User.objects.create_user(f"w{n}", is_staff=True)
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
        api = TokenClient(make_token(user=user))
        for method, path, body, needed in API_WRITES:
            if needed == {perm}:
                continue  # it may: what it does is the endpoint's own tests'
            status = api.send(method, path.format(**ids), body).status_code
            if status != 403:
                wrong.append(f"{perm}: {method.upper()} {path} answered {status}")
    assert wrong == []
    assert Job.objects.filter(pk=job.pk, name="j").exists()
