"""Gathering the facts for "Why didn't it run?" (F-66): the job and its
triggers (a dependency's upstream job with its last run), the live beats
with their scheduler switches and the live workers (their heartbeats), the
queue switches and the maintenance allow-list, a child's parent or a
parent's children, the condition's variable, the job's active runs, who
holds its Redis lock, and who holds the slots a run of it takes (its
group, the exclusive slot, the global limit). The checklist itself is the
pure heartbeats.core.explain.explain. Here, in heartbeats, because it reads
all three apps (heartbeats → runs → jobs).

The checklist in the reader's language: heartbeats/checklist.py.

Redis: one round trip per slot of the job's lock, and one for all the slot
sets the job's runs take (a MULTI with the server's TIME, so expired
members are told apart as the Lua scripts of runs/slots.py do).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from celery import current_app
from django.conf import settings

from heartbeats.core.check import phrase, status_phrase
from heartbeats.core.coordination import (
    ChildrenFacts,
    ConditionFacts,
    ParentFacts,
    SlotHolder,
    SlotsFacts,
)
from heartbeats.core.explain import BeatFacts, Explanation, JobFacts, RunFacts, explain
from heartbeats.core.triggers import TriggerFacts, starts_when
from heartbeats.processes import BEAT_PREFIX, WORKER_PREFIX, live_processes, read_queues
from jobs import registry
from jobs.core.constraints import allows
from jobs.core.cron import gettext_noop
from jobs.core.triggers import DEPENDENCY_STATUSES, zone_of
from jobs.models import ConcurrencyGroup, Job, QueueState, ResultVariable, Trigger
from jobs.policies import TriggerKind
from jobs.specs import allowed_in_maintenance, trigger_constraints, trigger_description
from runs import lock_files
from runs.core.start import SlotNeeds
from runs.locks import get_redis, job_lock, token_run_id
from runs.models import ACTIVE_STATUSES, FINISHED_STATUSES, Run, RunStatus
from runs.publish import queue_of
from runs.slots import exclusive_key, group_key, grouped_key, member_run_id, running_key
from runs.variables import job_condition
from runs.waiting import slot_needs


def _job_words(job_id: int, name: str) -> str:
    return f"{name!r} (#{job_id})"


def _trigger_facts(job: Job, *, now: datetime) -> tuple[TriggerFacts, ...]:
    facts = []
    for trigger in job.triggers.select_related("upstream_job"):
        if trigger.kind == TriggerKind.DEPENDENCY:
            facts.append(_dependency_facts(trigger))
            continue
        try:
            constraints = trigger_constraints(trigger, now=now)
        except Exception:  # an invalid stored trigger: say it is not allowed now
            constraints, allowed = None, False
        else:
            zone = zone_of(trigger.timezone or settings.TIME_ZONE)
            allowed = constraints is None or allows(constraints, now, zone)
        facts.append(
            TriggerFacts(
                description=trigger_description(trigger),
                enabled=trigger.enabled,
                next_run_at=trigger.next_run_at,
                allowed_now=allowed,
            )
        )
    return tuple(facts)


def _dependency_facts(trigger: Trigger) -> TriggerFacts:
    """A dependency (F-33): the upstream job and how its last run ended (a
    run's end in one of the trigger's statuses starts this job)."""
    upstream = trigger.upstream_job if trigger.upstream_job_id is not None else None
    words = "(none)"  # a deleted upstream job: its dependency fires never
    last_words: object = ""
    if upstream is not None:
        words = _job_words(upstream.pk, upstream.name)
        run = (
            Run.objects.filter(job_id=upstream.pk, status__in=DEPENDENCY_STATUSES)
            .order_by("-pk")
            .values_list("pk", "status")
            .first()
        )
        if run is not None:
            last_words = phrase(
                gettext_noop("its last run #%(run)s ended %(status)s"),
                run=run[0],
                status=status_phrase([run[1]]),
            )
    return TriggerFacts(
        description=trigger_description(trigger),
        enabled=trigger.enabled,
        next_run_at=None,
        allowed_now=True,  # a dependency ignores weekdays and windows
        upstream=words,
        statuses=tuple(trigger.upstream_statuses or ("succeeded",)),
        upstream_last=last_words,
    )


def _lock_holders(job: Job) -> tuple[int, ...]:
    """The runs whose tokens hold the job's lock slots (one round trip per
    slot; a job has max_instances slots under overlap 'allow')."""
    slots = job.max_instances if job.overlap_policy == "allow" else 1
    holders = []
    for slot in range(max(slots, 1)):
        run_id = token_run_id(job_lock(job.pk, slot=slot).holder())
        if run_id is not None:
            holders.append(run_id)
    return tuple(holders)


def _active_runs(
    job: Job, holders: tuple[int, ...], *, parent: bool, now: datetime
) -> tuple[RunFacts, ...]:
    runs = list(
        Run.objects.filter(job=job, status__in=ACTIVE_STATUSES, scheduled_for__lte=now).only(
            "pk", "status", "started_at", "scheduled_for", "worker", "held", "waiting_for"
        )[:50]
    )
    children = (
        _active_children(job, [r.pk for r in runs if r.status == RunStatus.RUNNING])
        if parent
        else {}
    )
    unread = _unread_queue(job, now=now) if any(r.status == RunStatus.QUEUED for r in runs) else ""
    return tuple(
        RunFacts(
            run_id=run.pk,
            status=run.status,
            since=(run.started_at or run.scheduled_for)
            if run.status == RunStatus.RUNNING
            else run.scheduled_for,
            worker=run.worker,
            lock_alive=run.pk in holders,
            held=run.held,
            waiting_for=run.waiting_for if run.held else "",
            child=children.get(run.pk, ""),
            unread_queue=unread if run.status == RunStatus.QUEUED and not run.held else "",
        )
        for run in runs
    )


def celery_app_name() -> str:
    """What `celery -A` names for the app Takt uses: the project's app's
    package (its `main`, as Celery's guide names it), or Takt's own project."""
    main = str(current_app.main or "")
    return "scheduler_project" if main in ("", "takt") else main


def _unread_queue(job: Job, *, now: datetime) -> str:
    """The queue the job's runs go to, when no live worker consumes it."""
    queue = queue_of(job, {})
    read = read_queues(now=now)
    return "" if read is None or queue in read else queue


def _active_children(job: Job, parent_runs: list[int]) -> dict[int, object]:
    """A parent's running runs (F-04): the active child run of each, in
    words. Such a run holds no lock while its children run."""
    if not parent_runs:
        return {}
    found = Run.objects.filter(
        cause_id__in=parent_runs, job__parent_id=job.pk, status__in=ACTIVE_STATUSES
    ).order_by("pk")
    return {
        cause: phrase(
            gettext_noop("run #%(run)s of job %(job)s, %(status)s"),
            run=pk,
            job=_job_words(job_id, name),
            status=status_phrase([status]),
        )
        for pk, cause, job_id, name, status in found.values_list(
            "pk", "cause_id", "job_id", "job__name", "status"
        )
    }


def _parent_facts(job: Job, *, now: datetime) -> ParentFacts | None:
    """A child's parent (F-04): what starts it, and its runs."""
    parent = Job.objects.filter(pk=job.parent_id).first()
    if parent is None:
        return None
    triggers = [t for t in _trigger_facts(parent, now=now) if t.enabled]
    clock = [t.next_run_at for t in triggers if not t.upstream and t.next_run_at]
    siblings = list(
        Job.objects.filter(parent_id=parent.pk, enabled=True)
        .order_by("child_order", "pk")
        .values_list("pk", flat=True)
    )
    running = (
        Run.objects.filter(job=parent, status=RunStatus.RUNNING)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    last = (
        Run.objects.filter(job=parent, status__in=FINISHED_STATUSES)
        .order_by("-pk")
        .values_list("pk", "status", "message")
        .first()
    )
    return ParentFacts(
        job=_job_words(parent.pk, parent.name),
        enabled=parent.enabled,
        paused=parent.paused,
        has_trigger=bool(triggers),
        next_run_at=min(clock, default=None),
        starts=tuple(starts_when(t) for t in triggers if t.upstream),
        position=siblings.index(job.pk) + 1 if job.pk in siblings else 0,
        siblings=len(siblings),
        stop_on_failure=parent.stop_on_child_failure,
        running_run=running,
        last_run=last[0] if last else None,
        last_status=status_phrase([last[1]]) if last else "",
        last_message=last[2] if last else "",
    )


def _children_facts(job: Job) -> ChildrenFacts | None:
    """A parent's children (F-04), in their order; None: not a parent."""
    children = list(
        Job.objects.filter(parent_id=job.pk)
        .order_by("child_order", "pk")
        .values_list("pk", "name", "enabled")
    )
    if not children:
        return None
    return ChildrenFacts(
        enabled=tuple(_job_words(pk, name) for pk, name, enabled in children if enabled),
        disabled=sum(1 for *_, enabled in children if not enabled),
        stop_on_failure=job.stop_on_child_failure,
    )


def _condition_facts(job: Job) -> ConditionFacts | None:
    """The job's condition (F-32): its variable's value, who set it last,
    and which jobs write it."""
    if job.condition_variable_id is None:
        return None
    variable = ResultVariable.objects.filter(pk=job.condition_variable_id).first()
    condition = job_condition(job, variable.name if variable else "?")
    assert condition is not None
    if variable is None:
        return ConditionFacts(condition, None)
    changed_by: object = ""
    if variable.changed_by:
        changed_by = phrase(gettext_noop("%(who)s (by hand)"), who=variable.changed_by)
    if variable.changed_by_run is not None:
        run = (
            Run.objects.filter(pk=variable.changed_by_run)
            .values_list("job_id", "job__name")
            .first()
        )
        changed_by = (
            phrase(
                gettext_noop("run #%(run)s of job %(job)s"),
                run=variable.changed_by_run,
                job=_job_words(*run),
            )
            if run
            else phrase(gettext_noop("run #%(run)s"), run=variable.changed_by_run)
        )
    writers = Job.objects.filter(result_variable_id=variable.pk).order_by("pk")
    return ConditionFacts(
        condition,
        variable.value,
        changed_at=variable.changed_at,
        changed_by=changed_by,
        writers=tuple(_job_words(pk, name) for pk, name in writers.values_list("pk", "name")),
    )


def _slots_facts(job: Job, needs: SlotNeeds) -> SlotsFacts | None:
    """Who holds the slots a run of the job takes (F-31, F-34); None when it
    takes none (a parent, or no group, not exclusive and no global limit)."""
    if not needs.any:
        return None
    keys: dict[str, str] = {}
    if needs.exclusive:
        keys |= {"exclusive": exclusive_key(), "grouped": grouped_key()}
    elif needs.group is not None:
        keys |= {"group": group_key(needs.group), "exclusive": exclusive_key()}
    if needs.global_limit is not None:
        keys["running"] = running_key()
    members = dict(zip(keys, _slot_members(list(keys.values())), strict=True))
    ids = {run_id for found in members.values() for run_id, _ in found if run_id is not None}
    jobs = {
        pk: (job_id, name)
        for pk, job_id, name in Run.objects.filter(pk__in=ids).values_list(
            "pk", "job_id", "job__name"
        )
    }

    def holders(name: str) -> tuple[SlotHolder, ...]:
        out = []
        for run_id, reserved in members.get(name, []):
            job_id, job_name = jobs.get(run_id, (None, "")) if run_id is not None else (None, "")
            words = _job_words(job_id, job_name) if job_id is not None else ""
            out.append(SlotHolder(run_id, words, reserved=reserved, own=job_id == job.pk))
        return tuple(out)

    group_name = ""
    if needs.group is not None and not needs.exclusive:
        group_name = (
            ConcurrencyGroup.objects.filter(pk=needs.group).values_list("name", flat=True).first()
            or "?"
        )
    return SlotsFacts(
        needs,
        group_name=group_name,
        group=holders("group"),
        grouped=holders("grouped"),
        exclusive=holders("exclusive"),
        running=holders("running"),
    )


def _slot_members(keys: Sequence[str]) -> list[list[tuple[int | None, bool]]]:
    """The live members of each slot set, (run id, reserved), oldest expiry
    first, in one round trip: Redis's TIME and each set in one MULTI; a
    member whose expiry (its score, in ms of Redis's clock) has passed
    belongs to a dead worker and is left out."""
    pipe = get_redis().pipeline(transaction=True)
    pipe.time()
    for key in keys:
        pipe.zrange(key, 0, -1, withscores=True)
    (seconds, micros), *sets = pipe.execute()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    out = []
    for found in sets:
        live = []
        for member, score in found:
            text = member.decode() if isinstance(member, bytes) else str(member)
            if score > now_ms:
                live.append((member_run_id(text), text.startswith("res:")))
        out.append(live)
    return out


def job_facts(job: Job, *, now: datetime) -> JobFacts:
    """Everything the checklist looks at; raises redis.RedisError when
    Redis cannot be reached (the caller says so)."""
    queue = QueueState.objects.filter(pk=1).first()
    holders = _lock_holders(job)
    beats = live_processes(BEAT_PREFIX, now=now)
    lock_file = lock_files.describe(lock_files.seen_in_cluster())
    children = _children_facts(job)
    return JobFacts(
        name=job.name,
        enabled=job.enabled,
        triggers=_trigger_facts(job, now=now),
        beats=tuple(BeatFacts(b.name, b.scheduler_enabled) for b in beats),
        workers=len(live_processes(WORKER_PREFIX, now=now)),
        celery_app=celery_app_name(),
        queue_paused=bool(queue and queue.paused),
        queue_pause_note=queue.pause_note if queue else "",
        queue_paused_until=queue.paused_until if queue and queue.paused else None,
        maintenance=bool(queue and queue.maintenance) or bool(lock_file),
        maintenance_note=queue.maintenance_note if queue and queue.maintenance else "",
        maintenance_lock_file=lock_file,
        target=job.target,
        allowed_during_maintenance=allowed_in_maintenance(job),
        allow_list=tuple(registry.allowed_names()),
        paused=job.paused,
        pause_note=job.pause_note,
        paused_until=job.paused_until,
        max_runs=job.max_runs,
        runs_done=job.runs_done,
        parent=_parent_facts(job, now=now) if job.parent_id is not None else None,
        children=children,
        condition=_condition_facts(job),
        active_runs=_active_runs(job, holders, parent=children is not None, now=now),
        overlap_policy=job.overlap_policy,
        max_instances=job.max_instances,
        slots=_slots_facts(job, slot_needs(job)),
        lock_holders=holders,
        poll_s=float(settings.TAKT_POLL_SECONDS),
        lock_ttl_s=float(settings.TAKT_LOCK_TTL_SECONDS),
    )


def explain_job(job: Job, *, now: datetime) -> Explanation:
    return explain(job_facts(job, now=now), now=now)
