"""The memory floor under Takt's beat: a fresh process that loads only the
stack every Takt process stands on (Django with its auth and contenttypes
apps, Celery with the Redis transport, redis-py and psycopg), runs one query
on the benchmark's database and acquires a producer, as a beat does before
its first tick. Nothing of Takt is imported. Prints its RSS as one JSON line:

    DATABASE_URL=... REDIS_URL=... python -m benchmarks.stack_probe

The tick section prints it next to Takt's beat, so the beat's memory reads
as the stack's plus Takt's own."""

from __future__ import annotations

import json
import os

import dj_database_url
from django.conf import settings


def main() -> None:
    database = dj_database_url.parse(os.environ["DATABASE_URL"])
    settings.configure(
        SECRET_KEY="stack-probe",
        USE_TZ=True,
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes"],
        DATABASES={"default": database},
    )
    import django

    django.setup()
    import psutil
    import psycopg  # noqa: F401  (the PostgreSQL driver: Takt's processes load it on SQLite too)
    from celery import Celery
    from django.db import connection

    app = Celery("stack", broker=os.environ["REDIS_URL"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    with app.producer_or_acquire() as producer:
        producer.connection.default_channel.client.ping()
        print(json.dumps({"rss_bytes": psutil.Process().memory_info().rss}))


if __name__ == "__main__":
    main()
