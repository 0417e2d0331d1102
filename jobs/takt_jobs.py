"""Built-in job callables."""

from __future__ import annotations

from typing import Any

from jobs.models import Job
from jobs.registry import takt_job


@takt_job("takt.hello_world")
def hello_world(job: Any) -> str:
    """F-05: greet, and show what a job can see."""
    from django.utils import timezone

    job.log(f"Hello, world! This is {job.name!r}.")
    job.log(f"Started by trigger: {job.trigger}")
    job.log(f"The time is {timezone.now().isoformat(timespec='seconds')}")
    job.log(f"There are {Job.objects.count()} jobs.")
    return "hello"
