"""Which Celery app Takt uses: the host project's own, else Takt's.

A Django project laid out as Celery's "First steps with Django" guide has it
defines its app in ``proj/celery.py`` and imports it from ``proj/__init__.py``,
so the app exists (and is Celery's current and default app) before Django
loads any installed app. Takt then uses *that* app in every process: its
broker, its routes, and every task its `autodiscover_tasks()` finds are
Takt's too. Only where no app was made (Takt run as its own project, or a
project without Celery of its own) is Takt's app, ``scheduler_project.celery``,
created — when the ``jobs`` app loads (jobs.apps), not when
``scheduler_project`` is imported, so importing Takt never replaces a
project's app.

A project's web process and its management commands never start a worker,
so nothing there imports the task modules `autodiscover_tasks()` promised:
`discover_tasks` does it once, the way the project's worker does, the first
time Takt needs to know whether a name is a task.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery, _state

_discovered: set[int] = set()
_discovering = threading.Lock()


def made_by_a_project(app: Any) -> bool:
    """Whether `app` is one a project made, not the fallback Celery creates
    on first use of `current_app` when nobody made one (named "default",
    without the Django fix-up)."""
    return app is not None and not (app.main == "default" and not app.fixups)


def project_app() -> Celery | None:
    """The app the project made, if any (the current one, else the default)."""
    for app in (_state._tls.current_app, _state.default_app):
        if made_by_a_project(app):
            return app
    return None


def discover_tasks(app: Any) -> None:
    """Import the app's task modules as its worker does on start (the
    modules `autodiscover_tasks()`, `imports` and `include` name), once per
    app. A worker or beat has done it already (loader.worker_initialized).
    `app` may be `celery.current_app` (a proxy)."""
    app = app._get_current_object() if hasattr(app, "_get_current_object") else app
    if id(app) in _discovered or getattr(app.loader, "worker_initialized", False):
        return
    with _discovering:
        if id(app) in _discovered:
            return
        app.loader.import_default_modules()
        _discovered.add(id(app))
