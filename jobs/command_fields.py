"""The fields of a command job (F-02 `command`), kept apart from the rest
of Job: an abstract model that Job inherits. Their checks are the pure
core's (jobs/core/command.py), applied by jobs/validation.py."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from jobs.core.command import NICE_MAX, NICE_MIN, ResultCodeAt


class CommandFields(models.Model):
    command = models.JSONField(
        _("command"),
        default=list,
        blank=True,
        help_text=_(
            "For a command job: the program and its arguments, one per item, e.g."
            ' ["rsync", "-a", "/srv/in/", "/srv/archive/"]. No shell, so nothing in them is'
            " expanded, unless “shell” is on."
        ),
    )
    shell = models.BooleanField(
        _("shell"),
        default=False,
        help_text=_(
            "Run the command as one command line through /bin/sh -c (pipes, globs,"
            " variables). Off by default: an argument list needs no quoting and expands nothing."
        ),
    )
    cwd = models.CharField(
        _("working directory"),
        max_length=500,
        blank=True,
        help_text=_("An absolute path; empty: the worker's own."),
    )
    env = models.JSONField(
        _("environment"),
        default=dict,
        blank=True,
        help_text=_('Variables added to the worker\'s environment, e.g. {"LANG": "C.UTF-8"}.'),
    )
    nice = models.SmallIntegerField(
        _("process priority (nice)"),
        default=0,
        validators=[MinValueValidator(NICE_MIN), MaxValueValidator(NICE_MAX)],
        help_text=format_lazy(
            _("{normal} normal … {lowest} lowest."), normal=NICE_MIN, lowest=NICE_MAX
        ),
    )
    success_codes = models.JSONField(
        _("success codes"),
        default=list,
        blank=True,
        help_text=_(
            "Exit codes that count as success, e.g. [0, 1]; empty: [0]. Any other"
            " fails the run; the exit code is the run's result code either way."
        ),
    )

    detached = models.BooleanField(
        _("detached"),
        default=False,
        help_text=_(
            "Detached: the run holds no worker process and no group slot while the"
            " program runs (it is followed in the background); the job stays locked until"
            " the program ends, and the run ends with it."
        ),
    )
    result_code_at = models.CharField(
        _("result code taken"),
        max_length=8,
        choices=[
            (ResultCodeAt.START.value, _("after the start (0 once it runs)")),
            (ResultCodeAt.EXIT.value, _("after the exit (its exit code)")),
        ],
        default=ResultCodeAt.START.value,
        help_text=_(
            "For a detached command: when its result code (and its result variable) is set."
        ),
    )

    script = models.TextField(
        _("script"),
        blank=True,
        help_text=_(
            "For a script job: Python source, run in its own process with `job` (job.log,"
            " job.fail, job.params, job.trigger) as a callable has it. Superusers only."
        ),
    )

    class Meta:
        abstract = True
