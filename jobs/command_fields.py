"""The fields of a command job (F-02 `command`), kept apart from the rest
of Job: an abstract model that Job inherits. Their checks are the pure
core's (jobs/core/command.py), applied by jobs/validation.py."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from jobs.core.command import NICE_MAX, NICE_MIN, ResultCodeAt


class CommandFields(models.Model):
    command = models.JSONField(
        default=list,
        blank=True,
        help_text="For a command job: the program and its arguments, one per item, e.g."
        ' ["rsync", "-a", "/srv/in/", "/srv/archive/"]. No shell, so nothing in them is'
        " expanded, unless “shell” is on.",
    )
    shell = models.BooleanField(
        default=False,
        help_text="Run the command as one command line through /bin/sh -c (pipes, globs,"
        " variables). Off by default: an argument list needs no quoting and expands nothing.",
    )
    cwd = models.CharField(
        "working directory",
        max_length=500,
        blank=True,
        help_text="An absolute path; empty: the worker's own.",
    )
    env = models.JSONField(
        "environment",
        default=dict,
        blank=True,
        help_text='Variables added to the worker\'s environment, e.g. {"LANG": "C.UTF-8"}.',
    )
    nice = models.SmallIntegerField(
        "process priority (nice)",
        default=0,
        validators=[MinValueValidator(NICE_MIN), MaxValueValidator(NICE_MAX)],
        help_text=f"{NICE_MIN} normal … {NICE_MAX} lowest.",
    )
    success_codes = models.JSONField(
        default=list,
        blank=True,
        help_text="Exit codes that count as success, e.g. [0, 1]; empty: [0]. Any other"
        " fails the run; the exit code is the run's result code either way.",
    )

    detached = models.BooleanField(
        default=False,
        help_text="Detached: the run holds no worker process and no group slot while the"
        " program runs (it is followed in the background); the job stays locked until"
        " the program ends, and the run ends with it.",
    )
    result_code_at = models.CharField(
        "result code taken",
        max_length=8,
        choices=[
            (ResultCodeAt.START.value, "after the start (0 once it runs)"),
            (ResultCodeAt.EXIT.value, "after the exit (its exit code)"),
        ],
        default=ResultCodeAt.START.value,
        help_text="For a detached command: when its result code (and its result variable) is set.",
    )

    script = models.TextField(
        blank=True,
        help_text="For a script job: Python source, run in its own process with `job` (job.log,"
        " job.fail, job.params, job.trigger) as a callable has it. Superusers only.",
    )

    class Meta:
        abstract = True
