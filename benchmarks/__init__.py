"""Reproducible performance measurements of Takt against plain Celery and
django-celery-beat. Entry points: ``make bench`` and ``make bench-quick``
(benchmarks/bench.sh → ``python -m benchmarks.run``); see README.md here."""
