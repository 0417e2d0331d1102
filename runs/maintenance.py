"""Maintenance (F-70..F-73): `run_maintenance()`, run by `manage.py
takt_maintenance` and by the built-in hourly job "Takt maintenance"
(runs/takt_jobs.py).

Sections, in this order (the names are those of ``--only``):

- ``lost``: runs whose worker died are marked `lost`, and retried where
  the job's retry policy says so (F-70; runs/recovery.py);
- ``expire``: runs queued or running for longer than
  TAKT_EXPIRE_AFTER_DAYS (7) are failed without being run (F-71; ditto);
- ``cleanup``: finished runs past TAKT_RETENTION_DAYS (14) are deleted in
  audited batches (F-52, F-72; runs/cleanup.py);
- ``decisions``: decision log entries older than TAKT_DECISION_LOG_DAYS
  (30) are deleted (F-65; runs/decisions.py);
- ``checks``: findings only, nothing changes (F-73);
- ``schedules``: triggers that will never fire again (no next fire time
  and no run to set one) are repaired, each with a critical alert and a
  decision (F-111; runs/stalled.py, which every beat also runs).

Each section runs on its own: one that raises is reported ("Cleanup 'runs'
failed: …", a warning finding) and the next one runs. Other apps add sections with `register_section` and raise
alerts from the findings in a `maintenance_finished` receiver (heartbeats →
runs: this module never imports them).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from django.db import connection
from django.db.models import F, Max, Q
from django.dispatch import Signal

from jobs.models import Job
from runs import cleanup, decisions, recovery, stalled
from runs.models import Run, RunStatus
from runs.progress import ProgressCallback, Steps

log = logging.getLogger("takt.maintenance")

# Sent after a pass that was not a dry run; kwargs: report (a Report), now.
# Receivers must not raise (a failing one is logged and ignored).
maintenance_finished = Signal()


class Severity(StrEnum):
    """The alert severities (F-62)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class Finding:
    """Something to raise an alert for: `key` is the alert's key (one alert
    per key, F-62), `title` its stable text, `detail` what was seen this
    time."""

    severity: Severity
    key: str
    title: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.severity}: {self.title}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class SectionResult:
    """What one section did: `counts` are kept up to date as it goes, so a
    section that fails half-way still says what it changed."""

    name: str
    label: str
    describe: Callable[[SectionResult], str]
    dry_run: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    error: str = ""
    named: list[str] = field(default_factory=list)  # what its line names

    @property
    def failure(self) -> Finding | None:
        if not self.error:
            return None
        return Finding(
            Severity.WARNING, f"maintenance:failed:{self.name}", f"{self.label} failed", self.error
        )

    def line(self) -> str:
        done = self.describe(self)
        if self.error:
            return f"{self.label} failed: {self.error}; before that: {done}"
        return f"{self.label}: {done}"


@dataclass
class Report:
    now: datetime
    dry_run: bool = False
    sections: list[SectionResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(s.error for s in self.sections)

    @property
    def findings(self) -> list[Finding]:
        """Every finding, the sections' failures included, in section order."""
        found: list[Finding] = []
        for section in self.sections:
            found += section.findings
            if section.failure is not None:
                found.append(section.failure)
        return found

    def lines(self) -> list[str]:
        """One line per section, each followed by its findings (indented)."""
        out: list[str] = []
        for section in self.sections:
            out.append(section.line())
            out += [f"  {finding}" for finding in section.findings]
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        return {s.name: {k: n for k, n in s.counts.items() if n} for s in self.sections}


@dataclass(frozen=True)
class Pass:
    """The arguments every section receives. `steps`: the pass's progress
    (F-93), a step per section and `planned[name]` more for the section
    that said so before the pass (its batches, advanced one by one)."""

    now: datetime
    batch: int
    dry_run: bool
    by: str
    steps: Steps = field(default_factory=lambda: Steps(0))
    planned: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    name: str
    label: str
    run: Callable[[SectionResult, Pass], None]
    describe: Callable[[SectionResult], str]
    plan: Callable[[Pass], int] | None = None


SECTIONS: dict[str, Section] = {}


def register_section(
    name: str,
    label: str,
    run: Callable[[SectionResult, Pass], None],
    describe: Callable[[SectionResult], str],
    plan: Callable[[Pass], int] | None = None,
) -> None:
    """Add (or replace) a section; sections run in the order registered.
    `run` fills the SectionResult (counts, findings) and may raise.
    `plan`, asked before the pass when its progress is followed, says how
    many steps (batches) the section will report besides its end."""
    SECTIONS[name] = Section(name, label, run, describe, plan)


def run_maintenance(
    *,
    now: datetime,
    batch: int = 1000,
    only: list[str] | None = None,
    dry_run: bool = False,
    by: str = "takt maintenance",
    progress: ProgressCallback | None = None,
) -> Report:
    """Run the sections (all, or those named in `only`, in their own order)
    at `now` (aware). `batch`: rows per statement in loops that go through
    many runs. `dry_run`: count what would change, change nothing, send no
    signal. `by` goes into the audit rows. `progress(done, total, note)`
    is told of each section's end (the note is its line) and each cleanup
    batch (F-93). Raises ValueError for an unknown section name; a failing
    section never raises, see Report.failed."""
    unknown = sorted(set(only or []) - set(SECTIONS))
    if unknown:
        raise ValueError(
            f"unknown maintenance section(s) {', '.join(unknown)} (known: {', '.join(SECTIONS)})"
        )
    chosen = [s for s in SECTIONS.values() if not only or s.name in only]
    args = Pass(now=now, batch=max(int(batch), 1), dry_run=dry_run, by=by)
    planned = _plan(chosen, args) if progress is not None else {}
    steps = Steps(len(chosen) + sum(planned.values()), progress)
    args = replace(args, steps=steps, planned=planned)
    report = Report(now=now, dry_run=dry_run)
    for section in chosen:
        result = SectionResult(section.name, section.label, section.describe, dry_run=dry_run)
        report.sections.append(result)
        start = steps.done
        try:
            # No transaction around a section: what it did before failing
            # (a deleted batch, a run marked lost) stays done, and its
            # counts say so. Its writes bring their own transactions.
            section.run(result, args)
        except Exception as exc:
            result.error = str(exc) or type(exc).__name__
            log.exception("maintenance section %s failed", section.name)
        steps.advance(result.line(), to=start + 1 + planned.get(section.name, 0))
    if not dry_run:
        for receiver, response in maintenance_finished.send_robust(
            sender=Report, report=report, now=now
        ):
            if isinstance(response, Exception):
                log.error("maintenance_finished receiver %r failed: %r", receiver, response)
    return report


def _plan(chosen: list[Section], args: Pass) -> dict[str, int]:
    """The sections' planned steps; one that cannot tell plans none (its
    own run reports the trouble)."""
    planned = {}
    for section in chosen:
        if section.plan is not None:
            try:
                planned[section.name] = max(int(section.plan(args)), 0)
            except Exception:
                log.exception("maintenance section %s could not plan its progress", section.name)
    return planned


# --- lost and expired runs (F-70, F-71; runs/recovery.py) -------------------


def _lost(result: SectionResult, args: Pass) -> None:
    recovery.recover_lost_runs(result.counts, now=args.now, batch=args.batch, dry_run=args.dry_run)


def _describe_lost(result: SectionResult) -> str:
    c = result.counts
    verb = "would mark" if result.dry_run else "marked"
    text = f"{verb} {_count(c['lost'], 'run')} lost"
    if c["retried"]:
        text += f" ({c['retried']} retried)"
    if c["locked"]:
        text += (
            f"; {_count(c['locked'], 'run')} running for longer than the lock TTL left alone"
            " (their job's lock is held)"
        )
    if c["waited"]:
        text += "; waited: Redis's data is younger than the lock TTL + 1 s"
    return text


def _expire(result: SectionResult, args: Pass) -> None:
    """Adds the warning "Runs expired after N days" when it failed any."""
    expired: list[int] = []
    try:
        recovery.expire_stale_runs(expired, now=args.now, batch=args.batch, dry_run=args.dry_run)
    finally:
        result.counts["expired"] += len(expired)
    if expired and not args.dry_run:
        shown = ", ".join(f"#{pk}" for pk in expired[:10]) + (", …" if len(expired) > 10 else "")
        result.findings.append(
            Finding(
                Severity.WARNING,
                "maintenance:runs-expired",
                f"Runs expired after {recovery.expire_after_days()} days",
                f"{_count(len(expired), 'run')} queued or running too long marked failed: {shown}",
            )
        )


def _describe_expire(result: SectionResult) -> str:
    verb = "would mark" if result.dry_run else "marked"
    return (
        f"{verb} {_count(result.counts['expired'], 'run')} failed"
        f" (queued or running for more than {recovery.expire_after_days()} days)"
    )


# --- retention cleanup (F-52, F-72) ----------------------------------------

CLEANUP_LABEL = "Cleanup 'runs'"


def _cleanup(result: SectionResult, args: Pass) -> None:
    if args.dry_run:
        result.counts["deleted"] += cleanup.count_expired_runs(now=args.now)
        return
    done = cleanup.Deleted()
    expected = args.planned.get("cleanup")

    def batch_done(done: cleanup.Deleted) -> None:
        of = f" of {expected}" if expected else ""
        args.steps.advance(f"{CLEANUP_LABEL}: batch {done.batches}{of}, {done.runs} runs deleted")

    try:
        cleanup.delete_expired_runs(
            done, now=args.now, batch=args.batch, by=args.by, on_batch=batch_done
        )
    finally:
        result.counts["deleted"] += done.runs
        result.counts["batches"] += done.batches


def _plan_cleanup(args: Pass) -> int:
    """The batches a cleanup will delete (none in a dry run, which only counts)."""
    if args.dry_run:
        return 0
    return -(-cleanup.count_expired_runs(now=args.now) // args.batch)  # rounded up


def _describe_cleanup(result: SectionResult) -> str:
    n = result.counts["deleted"]
    days = cleanup.retention_days()
    if result.dry_run:
        return f"would delete {_count(n, 'finished run')} older than {days} days"
    batches = result.counts["batches"]
    return (
        f"deleted {_count(n, 'finished run')} older than {days} days"
        f" in {_count(batches, 'batch', 'batches')} ({_count(batches, 'audit row')})"
    )


def _decisions(result: SectionResult, args: Pass) -> None:
    if args.dry_run:
        result.counts["deleted"] += decisions.count_expired(now=args.now)
        return
    result.counts["deleted"] += decisions.delete_expired(now=args.now, batch=args.batch)


def _describe_decisions(result: SectionResult) -> str:
    verb = "would delete" if result.dry_run else "deleted"
    n = _count(result.counts["deleted"], "decision")
    return f"{verb} {n} older than {decisions.retention_days()} days"


# --- checks (F-73) ----------------------------------------------------------


def _checks(result: SectionResult, args: Pass) -> None:
    """Report only: tables of installed models missing from the database
    (critical), and jobs that retry whose first retry delay is shorter than
    their longest recorded run (warning: the retry of a lost run may start
    while the lost one was still going, had it been alive)."""
    missing = missing_tables()
    for table in missing:
        result.findings.append(
            Finding(
                Severity.CRITICAL,
                f"maintenance:schema:{table}",
                f"Schema problem: table {table} is missing",
            )
        )
    if {Job._meta.db_table, Run._meta.db_table} & set(missing):
        return
    slow = (
        Job.objects.filter(max_retries__gt=0)
        # A lost run's duration is unknown (None), also in rows from before.
        .annotate(longest_s=Max("runs__duration_s", filter=~Q(runs__status=RunStatus.LOST)))
        .filter(longest_s__gt=F("retry_backoff_s"))
        .order_by("pk")
    )
    for job in slow:
        result.findings.append(
            Finding(
                Severity.WARNING,
                f"maintenance:retry-delay:job:{job.pk}",
                f"Retry delay shorter than the longest run: job '{job.name}' (#{job.pk})",
                f"first retry after {job.retry_backoff_s} s;"
                f" longest recorded run {job.longest_s:g} s",
            )
        )


def missing_tables() -> list[str]:
    """The tables of the installed, managed models (many-to-many tables
    included) that the database does not have."""
    introspection = connection.introspection
    expected = introspection.django_table_names(only_existing=False, include_views=False)
    return sorted(set(expected) - set(introspection.table_names()))


def _describe_checks(result: SectionResult) -> str:
    if not result.findings:
        return "all checks passed"
    by_severity = {s: sum(f.severity == s for f in result.findings) for s in Severity}
    return ", ".join(f"{n} {s}" for s, n in by_severity.items() if n)


# --- schedules that stopped (F-111; runs/stalled.py) -------------------------


def _schedules(result: SectionResult, args: Pass) -> None:
    """The alerts come from runs.stalled (the trigger_stalled signal), as
    when a beat finds them: not findings, which would raise them twice."""
    found = stalled.repair_stalled_triggers(now=args.now, dry_run=args.dry_run)
    result.counts["stalled"] += len(found)
    result.counts["unrepaired"] += sum(s.next_run_at is None for s in found)
    result.named += [f"#{s.trigger_id} of '{s.job_name}'" for s in found]


def _describe_schedules(result: SectionResult) -> str:
    n, bad = result.counts["stalled"], result.counts["unrepaired"]
    if not n:
        return "none (every trigger that can fire has a next fire time or a run to set it)"
    verb = "would repair" if result.dry_run else "repaired"
    names = ", ".join(result.named[:10]) + (", …" if len(result.named) > 10 else "")
    text = f"{verb} {_count(n - bad, 'trigger')} that would not fire again ({names})"
    if bad:
        text += f"; {_count(bad, 'trigger')} cannot be evaluated"
    return text


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def section_names() -> list[str]:
    return list(SECTIONS)


register_section("lost", "Recover lost runs", _lost, _describe_lost)
register_section("expire", "Expire runs", _expire, _describe_expire)
register_section("cleanup", CLEANUP_LABEL, _cleanup, _describe_cleanup, _plan_cleanup)
register_section("decisions", "Cleanup 'decisions'", _decisions, _describe_decisions)
register_section("checks", "Checks", _checks, _describe_checks)
register_section("schedules", "Stalled schedules", _schedules, _describe_schedules)

__all__ = [
    "Finding",
    "Report",
    "SectionResult",
    "Severity",
    "maintenance_finished",
    "register_section",
    "run_maintenance",
]
