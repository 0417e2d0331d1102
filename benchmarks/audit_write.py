"""The write path of the two audit libraries Takt chose between (F-120):
django-simple-history and django-auditlog, each attached to the Job model
in the same process, on the same database (a fresh SQLite file), in the same run. A job is
saved N times (a changed field each time, one transaction per save, as an
admin or API write is) without history, with django-simple-history only,
and with django-auditlog only; the rounds alternate so that a warming
disk or cache does not favour one. Prints seconds per save and the ratio
against saving without history.

    .venv/bin/python -m benchmarks.audit_write [N]
    DATABASE_URL=postgres://…/empty_db .venv/bin/python -m benchmarks.audit_write [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager


def main(n: int = 2000, rounds: int = 5) -> None:
    tmp = tempfile.mkdtemp(prefix="takt-audit-bench-")
    os.environ["TAKT_AUDIT_BENCH_DB"] = os.path.join(tmp, "db.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.audit_settings"
    import django

    django.setup()
    from auditlog.context import disable_auditlog
    from auditlog.registry import auditlog
    from django.core.management import call_command
    from django.db import connection, transaction
    from simple_history import register
    from simple_history.utils import get_history_model_for_model

    from jobs.models import Job

    call_command("migrate", verbosity=0)
    register(Job, app="jobs", table_name="bench_historical_job")
    with connection.schema_editor() as editor:
        editor.create_model(get_history_model_for_model(Job))
    auditlog.register(Job)
    job = Job.objects.create(name="bench", target="tests.noop")

    @contextmanager
    def no_simple_history() -> Iterator[None]:
        job.skip_history_when_saving = True
        try:
            yield
        finally:
            del job.skip_history_when_saving

    @contextmanager
    def nothing() -> Iterator[None]:
        with disable_auditlog(), no_simple_history():
            yield

    variants: dict[str, Callable[[], AbstractContextManager[None]]] = {
        "without history": nothing,
        "django-simple-history": disable_auditlog,
        "django-auditlog": no_simple_history,
    }
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, context in variants.items():
            with context():
                started = time.perf_counter()
                for i in range(n):
                    with transaction.atomic():
                        job.description = f"save {i}"
                        job.save()
                seconds[name].append((time.perf_counter() - started) / n)
    base = statistics.median(seconds["without history"])
    print(f"{n} saves of a job x {rounds} rounds, {connection.vendor}, median per save")
    for name, values in seconds.items():
        per_save = statistics.median(values)
        print(f"  {name:24} {per_save * 1e6:8.0f} us  x{per_save / base:.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
