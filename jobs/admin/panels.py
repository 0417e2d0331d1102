"""What the job editor shows besides its form (F-91, F-51, F-66): the
one-line summaries of the collapsed policy sections, the run history, and
the "Why didn't it run?" panel."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from heartbeats.checklist import check_detail, check_name, runs_next_words, verdict_text
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
from runs.decisions import drain_quietly
from runs.labels import trigger_word
from runs.models import Run, SchedulerDecision

HISTORY_ROWS = 25
# The job editor shows this many of the job's latest scheduler decisions
# (F-65), with a link to the rest in the decision list.
DECISION_ROWS = 20


def dispatch_summary(job: Job) -> str:
    if job.overlap_policy == "allow":
        overlap = _("allow up to %(n)s") % {"n": job.max_instances}
    elif job.overlap_policy == "buffer_all":
        overlap = _("buffer up to %(n)s") % {"n": job.max_buffered}
    else:
        words = {
            "skip": _("skip"),
            "buffer_one": _("buffer one"),
            "cancel_other": _("cancel other"),
        }
        overlap = words.get(job.overlap_policy, job.overlap_policy.replace("_", " "))
    if job.missed_run_policy == "run_once":
        missed = _("run once (%(pick)s)") % {
            "pick": _pick_words().get(job.catchup_pick, job.catchup_pick)
        }
    elif job.missed_run_policy == "run_all":
        missed = _("run all")
    elif job.missed_run_policy == "skip":
        missed = _("skip")
    else:
        missed = job.missed_run_policy
    return _(
        "priority %(priority)s · queue %(queue)s · timeout %(timeout)s (%(action)s)"
        " · overlap %(overlap)s · missed runs: %(missed)s"
    ) % {
        "priority": job.priority,
        "queue": job.queue,
        "timeout": duration_text(job.timeout_s),
        "action": _timeout_words().get(job.timeout_action, job.timeout_action),
        "overlap": overlap,
        "missed": missed,
    }


def _pick_words() -> dict[str, str]:
    """The catch-up pick in a summary: "run once (latest)"."""
    return {
        "latest": pgettext("catch-up pick", "latest"),
        "earliest": pgettext("catch-up pick", "earliest"),
    }


def _timeout_words() -> dict[str, str]:
    """The timeout action in a summary: "timeout 1 h 00 min (stop)"."""
    return {
        "stop": pgettext("timeout action", "stop"),
        "continue": pgettext("timeout action", "continue"),
    }


def retries_summary(job: Job) -> str:
    if not job.max_retries:
        return _("no retries")
    text = _("up to %(n)s · first after %(first)s ×%(factor)s, at most %(longest)s") % {
        "n": job.max_retries,
        "first": duration_text(job.retry_backoff_s),
        "factor": f"{job.retry_backoff_factor:g}",
        "longest": duration_text(job.retry_backoff_max_s),
    }
    if job.retry_on_timeout:
        text = _("%(retries)s · also after a timeout") % {"retries": text}
    return text


def pause_summary(job: Job) -> str:
    parts = []
    if job.paused:
        parts.append(
            _("paused: %(note)s") % {"note": job.pause_note} if job.pause_note else _("paused")
        )
    if job.pause_after_failures:
        parts.append(_("pauses after %(n)s failures in a row") % {"n": job.pause_after_failures})
    if job.max_runs:
        parts.append(
            _("run limit %(limit)s (%(done)s done)")
            % {"limit": job.max_runs, "done": job.runs_done}
        )
    return " · ".join(parts) or _("not paused · no limits")


def operations_summary(job: Job) -> str:
    parts = []
    if job.heartbeat_deadline_s:
        parts.append(
            _("heartbeat deadline %(deadline)s")
            % {"deadline": duration_text(job.heartbeat_deadline_s)}
        )
    events = notify_events(job)
    if events:
        parts.append(_("notify on %(events)s") % {"events": ", ".join(events)})
    if job.owner:
        parts.append(_("owner %(owner)s") % {"owner": job.owner})
    if job.code_managed:
        parts.append(_("declared in code"))
    return " · ".join(parts) or _("no deadline · no notifications")


def coordination_summary(job: Job) -> str:
    """The heading of the editor's Coordination section (F-04, F-31..F-33)."""
    parts = []
    if job.exclusive:
        parts.append(_("exclusive"))
    elif job.concurrency_group_id is not None:
        group = job.concurrency_group
        parts.append(
            _("group %(name)s (limit %(limit)s)") % {"name": group.name, "limit": group.limit}
        )
    if job.condition_variable_id is not None:
        values = _(" or ").join(str(v) for v in job.condition_values or [])
        text = (
            _("starts when %(variable)s is %(values)s, consumed")
            if job.condition_consume
            else _("starts when %(variable)s is %(values)s")
        )
        parts.append(text % {"variable": job.condition_variable.name, "values": values})
    if job.result_variable_id is not None:
        parts.append(_("writes %(variable)s") % {"variable": job.result_variable.name})
    if job.parent_id is not None:
        parts.append(
            _("child of %(parent)s (#%(id)s)") % {"parent": job.parent.name, "id": job.parent_id}
        )
    if job.pk is not None:
        n = job.children.count()
        if n:
            if job.stop_on_child_failure:
                text = ngettext("parent of %(n)d child", "parent of %(n)d children", n)
            else:
                text = ngettext(
                    "parent of %(n)d child, runs them all after a failure",
                    "parent of %(n)d children, runs them all after a failure",
                    n,
                )
            parts.append(text % {"n": n})
    if allowed_in_maintenance(job):
        parts.append(_("allowed during maintenance"))
    return " · ".join(parts) or _("no group · no condition · no parent")


def command_summary(job: Job) -> str:
    """A command job's command line as it runs (cut at 80 characters)."""
    if job.kind != JobKind.COMMAND:
        return _("for command jobs only")
    argv = job.command if isinstance(job.command, list) else []
    if not argv or any(not isinstance(a, str) for a in argv):
        return _("no command yet")
    line = CommandSpec(argv=tuple(argv), shell=job.shell).describe()
    line = line if len(line) <= 80 else line[:79] + "…"
    return _("%(command)s (detached)") % {"command": line} if job.detached else line


def titled(title: str, summary: str) -> str:
    """A collapsed section's heading: its title and what it holds now."""
    return f"{title} — {summary}"


def limit_text(job: Job) -> str:
    """The run limit and the runs so far (the heartbeat counts every run;
    runs_done counts only while a limit is set)."""
    heartbeat = getattr(job, "heartbeat", None) if job.pk else None
    if heartbeat is not None:
        total = ngettext("%(n)d run so far", "%(n)d runs so far", heartbeat.run_count) % {
            "n": heartbeat.run_count
        }
    else:
        total = _("no run yet")
    if job.max_runs:
        return _("%(done)s of %(limit)s runs toward the limit (%(total)s)") % {
            "done": job.runs_done,
            "limit": job.max_runs,
            "total": total,
        }
    return _("no run limit (%(total)s)") % {"total": total}


def run_history(job: Job) -> SafeString:
    """The job's latest runs with their output, newest first (F-51)."""
    runs = list(
        Run.objects.filter(job=job).order_by("-enqueued_at", "-id").defer("params")[:HISTORY_ROWS]
    )
    if not runs:
        return format_html("<p>{}</p>", _("No runs yet."))
    rows = format_html_join(
        "",
        "<tr class='takt-run'><td><a href='{}'>#{}</a></td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td><details><summary>{}</summary><pre class='takt-output'>{}</pre></details></td></tr>",
        (
            (
                reverse("admin:takt_runs_run_change", args=[r.pk]),
                r.pk,
                status_badge(r.status),
                trigger_word(r.trigger),
                time_html(r.scheduled_for),
                time_html(r.started_at),
                time_html(r.finished_at),
                run_duration_text(r.status, r.duration_s),
                r.attempt,
                times_in_text(r.message[:80]) if r.message else _("output"),
                r.output or _("(no output)"),
            )
            for r in runs
        ),
    )
    more = reverse("admin:takt_runs_run_changelist") + f"?job={job.pk}"
    return format_html(
        "<table class='takt-history'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>"
        "<p><a href='{}'>{}</a></p>",
        format_html_join("", "<th>{}</th>", ((h,) for h in _history_headings())),
        rows,
        more,
        _("All runs of this job"),
    )


def run_link(run_id: int | None) -> SafeString:
    """A link to a run's page, "#41"; empty for no run."""
    if run_id is None:
        return format_html("{}", "")
    return format_html(
        "<a href='{}'>#{}</a>", reverse("admin:takt_runs_run_change", args=[run_id]), run_id
    )


def job_decisions(job: Job) -> SafeString:
    """The job's latest scheduler decisions, newest first, for its editor
    under "Why didn't it run?" (F-65; runs/decisions.py, drained first):
    DECISION_ROWS of them, each time in the browser's zone, and a link to
    all of them in the decision list."""
    drain_quietly()
    rows = list(SchedulerDecision.objects.filter(job_id=job.pk).order_by("-id")[:DECISION_ROWS])
    more = reverse("admin:takt_runs_schedulerdecision_changelist") + f"?job={job.pk}"
    link = format_html("<p><a href='{}'>{}</a></p>", more, _("All decisions about this job"))
    if not rows:
        return format_html("<p>{}</p>{}", _("No decisions recorded yet."), link)
    body = format_html_join(
        "",
        "<tr class='takt-decision'><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((time_html(r.at), r.kind, run_link(r.run_id), times_in_text(r.detail)) for r in rows),
    )
    headings = (_("Decided at"), _("Kind"), _("Run"), _("Detail"))
    return format_html(
        "<table class='takt-decisions'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>{}",
        format_html_join("", "<th>{}</th>", ((h,) for h in headings)),
        body,
        link,
    )


def _history_headings() -> list[str]:
    return [
        _("Run"),
        _("Status"),
        _("Trigger"),
        _("Scheduled for"),
        _("Started"),
        _("Finished"),
        _("Duration"),
        _("Attempt"),
        _("Message / output"),
    ]


def explanation_view(answer: Explanation | str) -> dict[str, object]:
    """F-66 for the template: the verdict and each check with its time as
    the admin shows times (the browser's zone), and the run to cancel when
    one holds the job; or the error text when the facts could not be read."""
    if isinstance(answer, str):
        return {"error": answer}
    checks = [{"ok": c.ok, "name": check_name(c), "detail": _detail(c)} for c in answer.checks]
    first = answer.holding_back
    if first is not None:
        verdict = _safe(
            _("held back by: %(check)s (%(detail)s)"),
            check=check_name(first),
            detail=_detail(first),
        )
    elif answer.next_run_at is not None:
        verdict = _safe(
            _("nothing holds it back: %(runs)s %(time)s"),
            runs=runs_next_words(answer),
            time=time_html(answer.next_run_at, relative=True),
        )
    else:  # no time in it: "it runs when job 'Import' (#3) ends succeeded"
        verdict = format_html("{}", verdict_text(answer, str))
    return {
        "ok": first is None,
        "verdict": verdict,
        "checks": checks,
        "blocking_run_id": answer.blocking_run_id,
    }


def _safe(template: str, **params: object) -> SafeString:
    """A translated sentence with HTML parameters: the sentence and each
    plain parameter escaped, SafeStrings (times, badges) kept."""
    escaped = {name: conditional_escape(value) for name, value in params.items()}
    return mark_safe(conditional_escape(template) % escaped)  # noqa: S308  (all escaped)


def _detail(check: Check) -> SafeString:
    """The check's detail in the active language, its time as the admin
    shows times."""
    if check.at is None:
        return format_html("{}", check_detail(check))
    return format_html("{} {}", check_detail(check), time_html(check.at))
