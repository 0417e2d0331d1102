"""What the job editor shows besides its form (F-91, F-51, F-66): the
one-line summaries of the collapsed policy sections, the run history, and
the "Why didn't it run?" panel."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from heartbeats.core.explain import Check, Explanation
from jobs.admin.display import (
    duration_text,
    run_duration_text,
    status_badge,
    time_html,
    times_in_text,
)
from jobs.core.command import CommandSpec
from jobs.models import Job
from jobs.policies import JobKind
from jobs.specs import allowed_in_maintenance, notify_events
from runs.models import Run

HISTORY_ROWS = 25


def dispatch_summary(job: Job) -> str:
    overlap = job.overlap_policy
    if overlap == "allow":
        overlap = f"allow up to {job.max_instances}"
    elif overlap == "buffer_all":
        overlap = f"buffer up to {job.max_buffered}"
    missed = {"skip": "skip", "run_once": f"run once ({job.catchup_pick})", "run_all": "run all"}
    return (
        f"priority {job.priority} · queue {job.queue} · timeout {duration_text(job.timeout_s)}"
        f" ({job.timeout_action}) · overlap {overlap.replace('_', ' ')}"
        f" · missed runs: {missed.get(job.missed_run_policy, job.missed_run_policy)}"
    )


def retries_summary(job: Job) -> str:
    if not job.max_retries:
        return "no retries"
    text = (
        f"up to {job.max_retries} · first after {duration_text(job.retry_backoff_s)}"
        f" ×{job.retry_backoff_factor:g}, at most {duration_text(job.retry_backoff_max_s)}"
    )
    if job.retry_on_timeout:
        text += " · also after a timeout"
    return text


def pause_summary(job: Job) -> str:
    parts = ["paused" + (f": {job.pause_note}" if job.pause_note else "")] if job.paused else []
    if job.pause_after_failures:
        parts.append(f"pauses after {job.pause_after_failures} failures in a row")
    if job.max_runs:
        parts.append(f"run limit {job.max_runs} ({job.runs_done} done)")
    return " · ".join(parts) or "not paused · no limits"


def operations_summary(job: Job) -> str:
    parts = []
    if job.heartbeat_deadline_s:
        parts.append(f"heartbeat deadline {duration_text(job.heartbeat_deadline_s)}")
    events = notify_events(job)
    if events:
        parts.append("notify on " + ", ".join(events))
    if job.owner:
        parts.append(f"owner {job.owner}")
    if job.code_managed:
        parts.append("declared in code")
    return " · ".join(parts) or "no deadline · no notifications"


def coordination_summary(job: Job) -> str:
    """The heading of the editor's Coordination section (F-04, F-31..F-33)."""
    parts = []
    if job.exclusive:
        parts.append("exclusive")
    elif job.concurrency_group_id is not None:
        group = job.concurrency_group
        parts.append(f"group {group.name} (limit {group.limit})")
    if job.condition_variable_id is not None:
        values = " or ".join(str(v) for v in job.condition_values or [])
        consume = ", consumed" if job.condition_consume else ""
        parts.append(f"starts when {job.condition_variable.name} is {values}{consume}")
    if job.result_variable_id is not None:
        parts.append(f"writes {job.result_variable.name}")
    if job.parent_id is not None:
        parts.append(f"child of {job.parent.name} (#{job.parent_id})")
    if job.pk is not None:
        n = job.children.count()
        if n:
            every = "" if job.stop_on_child_failure else ", runs them all after a failure"
            parts.append(f"parent of {n} {'child' if n == 1 else 'children'}{every}")
    if allowed_in_maintenance(job):
        parts.append("allowed during maintenance")
    return " · ".join(parts) or "no group · no condition · no parent"


def command_summary(job: Job) -> str:
    """A command job's command line as it runs (cut at 80 characters)."""
    if job.kind != JobKind.COMMAND:
        return "for command jobs only"
    argv = job.command if isinstance(job.command, list) else []
    if not argv or any(not isinstance(a, str) for a in argv):
        return "no command yet"
    line = CommandSpec(argv=tuple(argv), shell=job.shell).describe()
    line = line if len(line) <= 80 else line[:79] + "…"
    return f"{line} (detached)" if job.detached else line


def titled(title: str, summary: str) -> str:
    """A collapsed section's heading: its title and what it holds now."""
    return f"{title} — {summary}"


def limit_text(job: Job) -> str:
    """The run limit and the runs so far (the heartbeat counts every run;
    runs_done counts only while a limit is set)."""
    heartbeat = getattr(job, "heartbeat", None) if job.pk else None
    total = f"{heartbeat.run_count} runs so far" if heartbeat is not None else "no run yet"
    if job.max_runs:
        return f"{job.runs_done} of {job.max_runs} runs toward the limit ({total})"
    return f"no run limit ({total})"


def run_history(job: Job) -> SafeString:
    """The job's latest runs with their output, newest first (F-51)."""
    runs = list(
        Run.objects.filter(job=job).order_by("-enqueued_at", "-id").defer("params")[:HISTORY_ROWS]
    )
    if not runs:
        return format_html("<p>{}</p>", "No runs yet.")
    rows = format_html_join(
        "",
        "<tr class='takt-run'><td><a href='{}'>#{}</a></td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td><details><summary>{}</summary><pre class='takt-output'>{}</pre></details></td></tr>",
        (
            (
                reverse("admin:runs_run_change", args=[r.pk]),
                r.pk,
                status_badge(r.status),
                r.trigger,
                time_html(r.scheduled_for),
                time_html(r.started_at),
                time_html(r.finished_at),
                run_duration_text(r.status, r.duration_s),
                r.attempt,
                times_in_text(r.message[:80]) if r.message else "output",
                r.output or "(no output)",
            )
            for r in runs
        ),
    )
    more = reverse("admin:runs_run_changelist") + f"?job={job.pk}"
    return format_html(
        "<table class='takt-history'><thead><tr><th>Run</th><th>Status</th><th>Trigger</th>"
        "<th>Scheduled for</th><th>Started</th><th>Finished</th><th>Duration</th><th>Attempt</th>"
        "<th>Message / output</th></tr></thead><tbody>{}</tbody></table>"
        "<p><a href='{}'>All runs of this job</a></p>",
        rows,
        more,
    )


def explanation_view(answer: Explanation | str) -> dict[str, object]:
    """F-66 for the template: the verdict and each check with its time as
    the admin shows times (the browser's zone), and the run to cancel when
    one holds the job; or the error text when the facts could not be read."""
    if isinstance(answer, str):
        return {"error": answer}
    checks = [{"ok": c.ok, "name": c.name, "detail": _detail(c)} for c in answer.checks]
    first = answer.holding_back
    if first is not None:
        verdict = format_html("held back by: {} ({})", first.name, _detail(first))
    elif answer.next_run_at is not None:
        verdict = format_html(
            "nothing holds it back: {} {}",
            answer.runs_next_words(),
            time_html(answer.next_run_at, relative=True),
        )
    else:  # no time in it: "it runs when job 'Import' (#3) ends succeeded"
        verdict = format_html("{}", answer.verdict(str))
    return {
        "ok": first is None,
        "verdict": verdict,
        "checks": checks,
        "blocking_run_id": answer.blocking_run_id,
    }


def _detail(check: Check) -> SafeString:
    if check.at is None:
        return format_html("{}", check.detail)
    return format_html("{} {}", check.detail, time_html(check.at))
