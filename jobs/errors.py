"""Exceptions that callers of Takt's Python API may catch (F-40)."""

from __future__ import annotations


class TaktError(Exception):
    """Base class of every error Takt raises on purpose."""


class JobNotFound(TaktError, LookupError):
    """No job has this id."""


class InvalidInput(TaktError, ValueError):
    """A value was refused; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class QueuePaused(TaktError):
    """The queue is paused (F-28): no run is enqueued until it resumes."""


class MaintenanceMode(TaktError):
    """Maintenance mode is on (F-29) and the job is not allowed to start."""


class ConditionNotMet(TaktError):
    """The job's condition on a result variable does not hold (F-32): the
    variable holds none of the accepted values."""


class ChildJob(TaktError):
    """The job is a child (F-04): it runs only as part of its parent's run,
    never started by itself (API, enqueue_job, run files, dependencies)."""
