"""Result variables (F-32): a job may write its result code into a named
variable (-1 when its run starts, its code when it ends); another job may
require the variable to hold one of a list of values before it starts, and
consume it (reset it to -1 once it started). Written by the engine
(runs/variables.py); this is the definition and the value an operator sees.

The codes: 0 (or 200) for success; any other value means failure, and
Takt's own negative codes say what went wrong (`ResultCode`)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _

from jobs.audit import audited
from jobs.unique_names import UniqueNameWhateverCase

# A variable's value until a run sets it, and while the run that writes it runs.
PENDING = -1


class ResultCode(models.IntegerChoices):
    """The codes Takt writes for a run that gave none of its own."""

    OK = 0, _("succeeded")
    FAILED = 1, _("failed (job.fail or a non-zero exit)")
    PENDING = -1, _("not ended yet, or no result")
    COULD_NOT_START = -1001, _("could not be started")
    TIMED_OUT_KILLED = -1002, _("timed out; stopped")
    TIMED_OUT_RUNNING = -1003, _("timed out; still running as the job says")
    CANNOT_MONITOR = -1004, _("cannot be monitored (its worker was lost)")
    ERROR = -1005, _("error while it ran (an exception, or cancelled)")


class ResultVariable(UniqueNameWhateverCase, models.Model):
    name = models.CharField(
        _("name"),
        max_length=100,
        help_text=_("Unique, whatever the case; the jobs that write and read it name it."),
    )
    value = models.IntegerField(_("value"), default=PENDING)
    changed_at = models.DateTimeField(_("changed at"), null=True, blank=True, editable=False)
    # The id of the run that last changed it (none: an operator). A plain id,
    # not a foreign key: the value outlives the run's row (retention).
    changed_by_run = models.PositiveBigIntegerField(
        _("changed by run"), null=True, blank=True, editable=False
    )
    changed_by = models.CharField(
        _("changed by"),
        max_length=200,
        blank=True,
        editable=False,
        help_text=_("Who set it by hand, if nobody's run."),
    )
    description = models.TextField(_("description"), blank=True)

    history = audited()

    class Meta:
        verbose_name = _("result variable")
        verbose_name_plural = _("result variables")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                Lower("name"),
                name="variable_unique_name",
                violation_error_message=_("a result variable with this name exists already"),
            )
        ]

    def __str__(self) -> str:
        return self.name
