"""Concurrency groups (F-31): jobs in one group run at most `limit` at a
time, jobs in different groups in parallel. The slots are taken in Redis
when a run starts (runs/slots.py); this is the definition an operator
edits. A job marked `exclusive` (the "global" group) is not in a group: it
starts only while no grouped job runs, and blocks every group while it runs."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _

from jobs.audit import audited
from jobs.unique_names import UniqueNameWhateverCase

MAX_GROUP_LIMIT = 1000
# The admin's colour picker offers these first; any #rrggbb is accepted.
DEFAULT_COLOUR = "#2f6fde"


class ConcurrencyGroup(UniqueNameWhateverCase, models.Model):
    name = models.CharField(
        _("name"),
        max_length=100,
        help_text=_("Unique, whatever the case (the manual's colour groups: 'Blue', 'Imports')."),
    )
    colour = models.CharField(
        _("colour"),
        max_length=7,
        default=DEFAULT_COLOUR,
        validators=[RegexValidator(r"^#[0-9a-fA-F]{6}$", _("a colour as #rrggbb, e.g. #2f6fde"))],
        help_text=_("Shown beside the group's name in the job list."),
    )
    limit = models.PositiveSmallIntegerField(
        _("limit"),
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GROUP_LIMIT)],
        help_text=_("How many runs of the group's jobs may run at once (1: one after the other)."),
    )
    description = models.TextField(_("description"), blank=True)

    history = audited()

    class Meta:
        verbose_name = _("concurrency group")
        verbose_name_plural = _("concurrency groups")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                Lower("name"),
                name="group_unique_name",
                violation_error_message=_("a concurrency group with this name exists already"),
            )
        ]

    def __str__(self) -> str:
        return self.name
