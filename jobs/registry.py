"""The registry of job callables (F-02 `callable` kind).

A function becomes a job target with ``@takt_job`` (or ``@takt_job("name")``);
the admin offers the registered names, and the worker resolves a job's
`target` here first, then among the Celery app's tasks (the project's own
app, its task modules imported as its worker imports them: jobs.celery_app). Modules named
``takt_jobs`` in installed apps, and those listed in ``TAKT_JOB_MODULES``,
are imported at start-up so their decorators run.

With a schedule or job fields, ``@takt_job("reports.nightly", schedule="0 3 * * *")``
also declares a job (F-75); jobs.declared turns the declarations into job
definitions and syncs them into the database.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])

# The keys of Takt's own jobs, made by migrations (takt.operations): never
# declared in code, never retired by a sync (jobs.declared), and no reason
# for the beat to load the sync's serializers (runs.beat).
BUILTIN_KEY_PREFIX = "takt."

_REGISTRY: dict[str, Callable[..., Any]] = {}
# F-75: registered name -> the decorator's declaration options (read by jobs.declared).
_DECLARED: dict[str, dict[str, Any]] = {}
# F-29: the maintenance allow-list, the names registered with
# allowed_during_maintenance=True (Takt's own: runs/takt_jobs.py).
_ALLOWED_IN_MAINTENANCE: set[str] = set()
# Params only the job sets, never a caller's run params (registered name ->
# keys), e.g. where takt.remote_run sends its token.
_JOB_ONLY_PARAMS: dict[str, frozenset[str]] = {}


class UnknownTarget(LookupError):
    """No registered callable or Celery task has this name."""


@overload
def takt_job(name_or_func: F) -> F: ...
@overload
def takt_job(
    name_or_func: str | None = None,
    *,
    allowed_during_maintenance: bool = False,
    job_only_params: tuple[str, ...] = (),
    **declaration: Any,
) -> Callable[[F], F]: ...
def takt_job(
    name_or_func: Any = None,
    *,
    allowed_during_maintenance: bool = False,
    job_only_params: tuple[str, ...] = (),
    **declaration: Any,
) -> Any:
    """Register a function as a job target. The function receives one
    argument, the run's context (``job.log()``, ``job.params`` ...).

    Without a name the target is ``module.function``. Registering a second
    function under a taken name raises ValueError.

    Keyword arguments also declare a job that runs it (F-75), synced into
    the database at start: ``schedule`` (a cron string), ``every`` (seconds
    or a timedelta), ``timezone`` (of the schedule), ``triggers`` (a list in
    the export format), ``key`` (default: the registered name) and any Job
    field (``name``, ``priority``, ``params`` ...). They are checked by the
    sync, which raises ImproperlyConfigured naming the job and the field.

    ``allowed_during_maintenance=True`` puts the function on the
    maintenance allow-list (F-29): jobs that run it start while maintenance
    mode is on or the queue is paused (a log-off or clean-up hook for a
    maintenance window); every other job's start is refused then. Only code
    decides this: no setting in the admin or the API widens the list.

    ``job_only_params=("url", …)`` names params only the job sets: a
    caller's run params (the API's) may not name them, whatever the job's
    `caller_params` allow (docs/security.md)."""

    def register(func: F, name: str | None) -> F:
        key = name or f"{func.__module__}.{func.__qualname__}"
        existing = _REGISTRY.get(key)
        if existing is not None and existing is not func:
            same_origin = (
                getattr(existing, "__module__", None) == func.__module__
                and getattr(existing, "__qualname__", None) == func.__qualname__
            )
            if not same_origin:  # a module imported twice re-registers the same function
                raise ValueError(f"takt_job: the name {key!r} is already registered")
        _REGISTRY[key] = func
        if allowed_during_maintenance:
            _ALLOWED_IN_MAINTENANCE.add(key)
        if job_only_params:
            _JOB_ONLY_PARAMS[key] = frozenset(job_only_params)
        if declaration:
            _DECLARED[key] = dict(declaration)
        return func

    if callable(name_or_func):
        return register(name_or_func, None)
    return lambda func: register(func, name_or_func)


def declared_by_decorator() -> dict[str, dict[str, Any]]:
    """{registered name: declaration options} of the decorators that declared a job."""
    return {name: dict(options) for name, options in _DECLARED.items()}


def allowed_in_maintenance(target: str) -> bool:
    """Whether the callable registered as `target` is on the maintenance
    allow-list (F-29)."""
    return target in _ALLOWED_IN_MAINTENANCE


def job_only_params(target: str) -> frozenset[str]:
    """The params of the function registered as `target` that only its job sets."""
    return _JOB_ONLY_PARAMS.get(target, frozenset())


def allowed_names() -> list[str]:
    """The maintenance allow-list: registered names, sorted."""
    return sorted(_ALLOWED_IN_MAINTENANCE)


def is_registered(target: str) -> bool:
    """Whether a function is registered with @takt_job as `target`."""
    return target in _REGISTRY


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def celery_task_names() -> list[str]:
    """The Celery tasks of the project's app, its task modules imported."""
    # lazy, as below: `import jobs` (the pure core's package) stays free of Celery
    from celery import current_app

    from jobs.celery_app import discover_tasks

    discover_tasks(current_app)
    return sorted(n for n in current_app.tasks if not n.startswith("celery."))


def resolve(target: str) -> tuple[Callable[..., Any], bool]:
    """Return (function, takes_context). Registered functions receive the
    run's context; Celery tasks are called with the job's args as positional
    and the run's params as keyword arguments. Raises UnknownTarget."""
    func = _REGISTRY.get(target)
    if func is not None:
        return func, True
    from celery import current_app

    from jobs.celery_app import discover_tasks

    task = current_app.tasks.get(target)
    if task is None:  # in a web process or a command, the first time
        discover_tasks(current_app)
        task = current_app.tasks.get(target)
    if task is not None:
        return task, False
    raise UnknownTarget(f"no job callable or Celery task is registered as {target!r}")


def is_celery_task(target: str) -> bool:
    """Whether `target` resolves to a Celery task rather than a function
    registered with @takt_job: only a Celery task takes positional
    arguments (Job.args)."""
    try:
        return not resolve(target)[1]
    except UnknownTarget:
        return False


def is_known(target: str) -> bool:
    try:
        resolve(target)
    except UnknownTarget:
        return False
    return True


def autodiscover() -> None:
    """Import every installed app's ``takt_jobs`` module and the modules in
    TAKT_JOB_MODULES (a missing listed module is an error naming it)."""
    from django.apps import apps
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    for app_config in apps.get_app_configs():
        module_name = f"{app_config.name}.takt_jobs"
        if importlib.util.find_spec(module_name) is not None:
            importlib.import_module(module_name)
    for module_name in settings.TAKT_JOB_MODULES:
        try:
            importlib.import_module(module_name)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"TAKT_JOB_MODULES: cannot import {module_name!r}: {exc}"
            ) from exc
