#!/usr/bin/env bash
# wait-for-redis.sh CMD [ARG...]: wait up to TAKT_REDIS_WAIT seconds (default
# 30) until REDIS_URL answers PING, then exec CMD. Keeps the worker, beat and
# flower of `make run` from racing the private redis-server at start-up; if
# Redis never answers, CMD starts anyway (Celery retries on its own).
set -euo pipefail
python - <<'EOF' || true
import os, sys, time

import redis

url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
deadline = time.monotonic() + float(os.environ.get("TAKT_REDIS_WAIT", "30"))
while True:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        break
    except ValueError:  # not a plain redis:// URL (e.g. Sentinel): don't wait
        break
    except redis.RedisError as exc:
        if time.monotonic() > deadline:
            print(f"wait-for-redis: {url} does not answer ({exc}); starting anyway", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.2)
EOF
exec "$@"
