"""Takt jobs: what runs, and when.

Public Python API::

    from jobs import takt_job, enqueue_job

``takt_job`` registers a function as a job target; ``enqueue_job`` starts a
run of a job now (or at ``run_at``) and returns the Run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.registry import takt_job

if TYPE_CHECKING:
    from runs.models import Run

__all__ = ["enqueue_job", "takt_job"]


def enqueue_job(job: Any, **kwargs: Any) -> Run:
    """Create a run of `job` (a Job or its id) and publish it; see
    runs.services.enqueue_job for the keyword arguments and errors."""
    from runs.services import enqueue_job as _enqueue_job

    return _enqueue_job(job, **kwargs)
