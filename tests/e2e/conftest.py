"""Real `celery worker` and `celery beat` processes (and a web server)
against the test database and the private Redis: the fixtures live in
tests/live_fixtures.py, shared with the browser tests."""

from __future__ import annotations

from tests.live_fixtures import (  # noqa: F401  (fixtures)
    _stop_what_the_test_started,
    beat,
    live_env,
    live_log_dir,
    server_env,
    start_process,
    wait_until,
    web,
    worker,
)
