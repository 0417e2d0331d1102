"""How a run's page and the run list show the links between runs (F-04,
F-31, F-33): what caused a run (the end of an upstream run, or the parent
run it is part of), the runs it caused (a parent run's children in their
order, each with its status; the dependants its end started), and what a
held run waits for (a slot of its group, the exclusive slot, the global
limit, or its job)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext, pgettext
from django.utils.translation import gettext_lazy as _

from jobs.admin.display import EMPTY, run_duration_text, time_html
from jobs.admin.groups import holders_html
from jobs.models import Job
from runs.admin.badges import status_badge
from runs.labels import trigger_word
from runs.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger, WaitingFor
from runs.slots import exclusive_key, group_key, grouped_key, running_key

# A run's page lists at most this many of the runs it caused.
CAUSED_ROWS = 100


def run_link(run_id: int) -> SafeString:
    return format_html(
        "<a href='{}'>{}</a>",
        reverse("admin:takt_runs_run_change", args=[run_id]),
        gettext("run #%(id)s") % {"id": run_id},
    )


def job_link(job_id: int, name: str) -> SafeString:
    return format_html(
        "<a href='{}'>{}</a>", reverse("admin:takt_jobs_job_change", args=[job_id]), name
    )


def cause_html(run: Run) -> SafeString | str:
    """What caused the run: "started by the end of run #n of job X (it
    ended succeeded)" or "child of parent run #n of job X"; the retries of a
    child say whose child they are too. EMPTY for a run nothing caused."""
    cause = run.cause
    if cause is None:
        if run.trigger in (RunTrigger.DEPENDENCY, RunTrigger.PARENT):
            return gettext("its cause is no longer stored (removed by the retention cleanup)")
        return EMPTY
    job = job_link(cause.job_id, cause.job.name)
    if run.trigger == RunTrigger.DEPENDENCY:
        return format_html(
            gettext("started by the end of {run} of job {job} (it ended {status})"),
            run=run_link(cause.pk),
            job=job,
            status=status_badge(cause.status),
        )
    return format_html(
        gettext("child of parent {run} of job {job}"), run=run_link(cause.pk), job=job
    )


@dataclass(frozen=True)
class ChildRow:
    """A child job of the parent run's job, and one of its runs for that
    parent run (None: it has none)."""

    position: int
    job_id: int
    name: str
    enabled: bool
    run: Run | None


def child_rows(parent: Run, caused: list[Run]) -> list[ChildRow]:
    """The parent run's children in their order (child_order, then id), a
    row per run (a child retried has several); a child without a run has
    one row. Runs of jobs that are no longer its children come last."""
    children = list(
        Job.objects.filter(parent_id=parent.job_id)
        .order_by("child_order", "pk")
        .only("pk", "name", "enabled")
    )
    by_job: dict[int, list[Run]] = {}
    for run in caused:
        by_job.setdefault(run.job_id, []).append(run)
    rows = []
    for position, child in enumerate(children, start=1):
        runs: list[Run | None] = [*by_job.pop(child.pk, [])] or [None]
        rows += [ChildRow(position, child.pk, child.name, child.enabled, run) for run in runs]
    for others in by_job.values():
        rows += [ChildRow(0, r.job_id, r.job.name, r.job.enabled, r) for r in others]
    return rows


def _not_run(row: ChildRow, parent: Run) -> str:
    if not row.enabled:
        return gettext("disabled: skipped")
    return gettext("not started yet") if parent.status in ACTIVE_STATUSES else gettext("not run")


def children_table(parent: Run, caused: list[Run]) -> SafeString:
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                row.position or "",
                job_link(row.job_id, row.name),
                run_link(row.run.pk) if row.run else EMPTY,
                status_badge(row.run.status) if row.run else _not_run(row, parent),
                trigger_word(row.run.trigger) if row.run else "",
                time_html(row.run.started_at) if row.run else "",
                run_duration_text(row.run.status, row.run.duration_s) if row.run else "",
            )
            for row in child_rows(parent, caused)
        ),
    )
    return format_html(
        "<table class='takt-caused'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
        _header(
            pgettext("position", "Order"),
            gettext("Child job"),
            pgettext("a run", "Run"),
            gettext("Status"),
            gettext("Trigger"),
            gettext("Started"),
            gettext("Duration"),
        ),
        rows,
    )


def _header(*titles: str) -> SafeString:
    return format_html_join("", "<th>{}</th>", ((title,) for title in titles))


def dependants_table(runs: Iterable[Run]) -> SafeString:
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                run_link(run.pk),
                job_link(run.job_id, run.job.name),
                status_badge(run.status),
                time_html(run.enqueued_at),
                run.message[:120] if run.message else "",
            )
            for run in runs
        ),
    )
    return format_html(
        "<table class='takt-caused'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
        _header(
            pgettext("a run", "Run"),
            gettext("Job"),
            gettext("Status"),
            gettext("Enqueued"),
            gettext("Message"),
        ),
        rows,
    )


def caused_panels(run: Run) -> list[dict[str, object]]:
    """The panels of the runs `run` caused, for its page: its children's
    runs (when its job is a parent or it has child runs) and the runs its
    end started (dependants). One query for the runs, one for the children."""
    caused = list(
        Run.objects.filter(cause_id=run.pk)
        .select_related("job")
        .defer("output", "params", "result", "job__params", "job__notify")
        .order_by("pk")[:CAUSED_ROWS]
    )
    parts = [r for r in caused if r.trigger in (RunTrigger.PARENT, RunTrigger.RETRY)]
    dependants = [r for r in caused if r.trigger == RunTrigger.DEPENDENCY]
    panels: list[dict[str, object]] = []
    if parts or Job.objects.filter(parent_id=run.job_id).exists():
        panels.append(
            {
                "id": "takt-children-runs",
                "title": gettext("Its children's runs, in their order"),
                "table": children_table(run, parts),
            }
        )
    if dependants:
        panels.append(
            {
                "id": "takt-dependants",
                "title": gettext("Runs its end started (jobs that run after this one)"),
                "table": dependants_table(dependants),
            }
        )
    return panels


WAITING_WORDS = {
    WaitingFor.EXCLUSIVE: _("waiting for every group's runs to end (an exclusive job)"),
    WaitingFor.LIMIT: _("waiting for a slot under the global limit TAKT_MAX_CONCURRENCY"),
    WaitingFor.NOTHING: _(
        "waiting for its job's running run to end (its overlap policy)"
        " or for the queue to be resumed"
    ),
}


def waiting_text(run: Run) -> SafeString | str:
    """For a held run, what it waits for (one line, for the run list):
    "waiting for a slot of group Database". EMPTY for any other run."""
    if not (run.held and run.status == RunStatus.QUEUED):
        return EMPTY
    if run.waiting_for == WaitingFor.GROUP:
        group = run.job.concurrency_group
        if group is not None:
            link = reverse("admin:takt_jobs_concurrencygroup_change", args=[group.pk])
            return format_html(
                gettext("waiting for a slot of group {group} (limit {limit})"),
                group=format_html("<a href='{}'>{}</a>", link, group.name),
                limit=group.limit,
            )
        return gettext(
            "waiting for a slot of its group (the job is in none now: it starts at the next try)"
        )
    words = WAITING_WORDS.get(run.waiting_for)  # type: ignore[call-overload]
    if words is None:
        return gettext("waiting for %(reason)s") % {"reason": run.waiting_for}
    return str(words)


def _is_none(holders: SafeString | str) -> bool:
    """Whether holders_html said that no run holds the slots ("none", in
    the active language)."""
    return str(holders) in ("none", gettext("none"))


def waiting_html(run: Run) -> SafeString | str:
    """For a held run's page: what it waits for, and the runs holding the
    slots it needs now (from Redis)."""
    text = waiting_text(run)
    if text is EMPTY:
        return EMPTY
    group_id = run.job.concurrency_group_id
    holders: list[tuple[str, str]] = []
    if run.waiting_for == WaitingFor.GROUP and group_id is not None:
        holders = [
            (gettext("in the group"), group_key(group_id)),
            (gettext("exclusive"), exclusive_key()),
        ]
    elif run.waiting_for == WaitingFor.EXCLUSIVE:
        holders = [
            (gettext("exclusive"), exclusive_key()),
            (gettext("in groups"), grouped_key()),
        ]
    elif run.waiting_for == WaitingFor.LIMIT:
        holders = [(gettext("in all"), running_key())]
    if not holders:
        return text
    # The slot set it waits for, always; the other only when a run holds it.
    (label, key), *others = holders
    parts = [(label, holders_html(key))]
    parts += [(other, shown) for other, key in others if not _is_none(shown := holders_html(key))]
    listed = format_html_join("; ", "{}: {}", parts)
    return format_html(gettext("{reason}. Running now {holders}"), reason=text, holders=listed)
