"""Validation of how jobs coordinate (F-31 groups, F-32 conditions, F-33
dependencies, F-04 parents): the checks that read other jobs. Called by
jobs/validation.py (Job.clean, Trigger.clean), so the admin, the API,
imports and jobs declared in code refuse the same things with the same
words, naming the field, and nothing is saved.

The graph rules:

* dependencies (triggers of kind `dependency`: upstream job → this job)
  and parents (a parent's run starts its children) never form a cycle,
  which would start runs for ever; the error names the jobs round the loop;
* a job is never its own ancestor (parent → child edges), and a parent
  runs no code of its own, so it is in no group and not exclusive: its
  children take their own slots;
* a child runs only as part of its parent's run: it takes no trigger of
  its own (a schedule, a dependency) and cannot be started from outside.

Queries go through the instances' own model classes (this module sits
below jobs/models.py, which calls it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from jobs.core.graph import ancestors, find_cycle
from jobs.policies import TriggerKind

if TYPE_CHECKING:
    from jobs.models import Job, Trigger


def validate_coordination(job: Job) -> None:
    """The job's group, condition and parent. Raises ValidationError naming
    the field."""
    if job.exclusive and job.concurrency_group_id is not None:
        raise ValidationError(
            {
                "exclusive": _(
                    "an exclusive job is in no group (it excludes every group):"
                    " clear its concurrency group, or exclusive"
                )
            }
        )
    _validate_condition(job)
    _validate_parent(job)


def _validate_condition(job: Job) -> None:
    values = job.condition_values
    if job.condition_variable_id is None:
        if values:
            raise ValidationError(
                {"condition_variable": _("accepted values need a variable to compare them with")}
            )
        if job.condition_consume:
            raise ValidationError(
                {"condition_consume": _("only a condition on a variable can be consumed")}
            )
        return
    if (
        not isinstance(values, list)
        or not values
        or any(not isinstance(v, int) or isinstance(v, bool) for v in values)
    ):
        raise ValidationError(
            {"condition_values": _("give the accepted values as whole numbers, e.g. [0, 200]")}
        )
    job.condition_values = sorted(set(values))


def _validate_parent(job: Job) -> None:
    model: Any = type(job)
    if job.parent_id is None:
        if job.pk is not None and (job.exclusive or job.concurrency_group_id is not None):
            if model.objects.filter(parent_id=job.pk).exists():
                field = "exclusive" if job.exclusive else "concurrency_group"
                raise ValidationError({field: _(_PARENT_RUNS_NO_CODE)})
        return
    if job.pk is not None and job.parent_id == job.pk:
        raise ValidationError({"parent": _("a job cannot be its own parent")})
    parents = dict(model.objects.filter(parent__isnull=False).values_list("pk", "parent_id"))
    if job.pk is not None:
        parents[job.pk] = job.parent_id
        chain = ancestors(parents, job.pk)  # stops before it would come back to the job
        if chain and parents.get(chain[-1]) == job.pk:
            loop = _names(model, [job.pk, *chain, job.pk])
            raise ValidationError(
                {"parent": _("that would make a loop of parents: %(loop)s") % {"loop": loop}}
            )
    if job.pk is not None:  # a parent's run starts its children: no dependency may loop back
        edges = _start_edges(model, model.triggers.rel.related_model, leave_out=None, child=job.pk)
        cycle = find_cycle(edges, new_from=job.parent_id, new_to=job.pk)
        if cycle is not None:
            loop = _names(model, cycle)
            raise ValidationError(
                {
                    "parent": _("that would make a loop of runs starting runs: %(loop)s")
                    % {"loop": loop}
                }
            )
    parent = model.objects.filter(pk=job.parent_id).values("exclusive", "concurrency_group").first()
    if parent is None:
        raise ValidationError({"parent": _("no job with id %(id)s") % {"id": job.parent_id}})
    if parent["exclusive"] or parent["concurrency_group"] is not None:
        raise ValidationError(
            {
                "parent": _("job #%(id)s is exclusive or in a group: %(reason)s")
                % {"id": job.parent_id, "reason": _(_PARENT_RUNS_NO_CODE)}
            }
        )


_PARENT_RUNS_NO_CODE = gettext_noop(
    "a parent runs no code of its own, its children do: put the children in groups instead"
)


def validate_trigger_links(trigger: Trigger) -> None:
    """A trigger's place among jobs: none on a child job; a dependency's
    upstream job exists, is another job, and closes no cycle. Raises
    ValidationError naming the field."""
    job = trigger.job if trigger.job_id is not None else None
    if job is not None and job.parent_id is not None and trigger.enabled:
        raise ValidationError(
            {
                "kind": _(
                    "job #%(id)s is a child of job #%(parent)s: it runs only as part of its"
                    " parent's run and takes no trigger of its own (disable or delete this"
                    " trigger, or clear its parent)"
                )
                % {"id": job.pk or _("(new)"), "parent": job.parent_id}
            }
        )
    if trigger.kind != TriggerKind.DEPENDENCY:
        return
    upstream = trigger.upstream_job_id
    if upstream is None:
        raise ValidationError({"upstream_job": _("required for a dependency trigger")})
    if job is None or job.pk is None:
        return  # a new job: nothing depends on it yet, so no cycle can close
    edges = _start_edges(type(job), type(trigger), leave_out=trigger.pk)
    cycle = find_cycle(edges, new_from=upstream, new_to=job.pk)
    if cycle is not None:
        if len(cycle) == 2 and cycle[0] == cycle[1]:
            raise ValidationError({"upstream_job": _("a job cannot depend on itself")})
        raise ValidationError(
            {
                "upstream_job": _("that would make a cycle: %(cycle)s")
                % {"cycle": _names(type(job), cycle)}
            }
        )


def _start_edges(
    job_model: Any, trigger_model: Any, *, leave_out: int | None, child: int | None = None
) -> dict[int, set[int]]:
    """Which job's runs start which job's runs: a dependency's upstream job
    starts its job (the trigger `leave_out`, being edited, left out), and a
    parent starts its children (`child`'s stored parent left out)."""
    edges: dict[int, set[int]] = {}
    stored = trigger_model.objects.filter(kind=TriggerKind.DEPENDENCY).exclude(pk=leave_out)
    for source, target in stored.values_list("upstream_job_id", "job_id"):
        edges.setdefault(source, set()).add(target)
    children = job_model.objects.filter(parent__isnull=False).exclude(pk=child)
    for target, source in children.values_list("pk", "parent_id"):
        edges.setdefault(source, set()).add(target)
    return edges


def _names(model: Any, ids: list[int]) -> str:
    names = dict(model.objects.filter(pk__in=set(ids)).values_list("pk", "name"))
    return " → ".join(f"{names.get(pk, '?')!r} (#{pk})" for pk in ids)
