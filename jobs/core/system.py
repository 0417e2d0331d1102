"""System jobs (F-02 `system`): Takt's built-in functions, selectable as a
job's kind with their parameters. The catalogue (names, what each does,
the parameters it takes) and the check that the admin, the API and imports
share (TriggerError naming `target` or `params`). The functions themselves
are registered callables (runs/takt_jobs.py); a system job's run calls its
target as a callable job's does. Pure core: stdlib only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobs.core.cron import TriggerError, gettext_noop

MAINTENANCE_SECTIONS = ("lost", "expire", "cleanup", "decisions", "checks", "schedules")


@dataclass(frozen=True)
class Param:
    kind: str  # "text" or "sections"
    help: str


@dataclass(frozen=True)
class SystemFunction:
    name: str
    label: str
    params: Mapping[str, Param] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: what it does and the params it takes."""
        if not self.params:
            return f"{self.label} (no params)"
        names = ", ".join(f"{k}: {p.help}" for k, p in self.params.items())
        return f"{self.label} (params: {names})"


NOTE = Param("text", "a note shown with the state, optional")

SYSTEM_FUNCTIONS: dict[str, SystemFunction] = {
    f.name: f
    for f in (
        SystemFunction(
            "takt.maintenance",
            "Maintenance pass: recover lost runs, expire stale ones, delete old runs,"
            " check heartbeats",
            {
                "only": Param(
                    "sections", f"the sections to run, of {', '.join(MAINTENANCE_SECTIONS)}"
                )
            },
        ),
        SystemFunction(
            "takt.cleanup",
            "Delete finished runs older than TAKT_RETENTION_DAYS",
        ),
        SystemFunction("takt.pause_queue", "Pause the queue", {"note": NOTE}),
        SystemFunction("takt.resume_queue", "Resume the queue"),
        SystemFunction("takt.maintenance_on", "Maintenance mode on", {"note": NOTE}),
        SystemFunction(
            "takt.maintenance_off",
            "Maintenance mode off (and delete the lock files, wherever a beat sees them)",
        ),
        SystemFunction(
            "takt.remove_lock_file",
            "Delete a maintenance lock file, wherever a beat sees it",
            {"path": Param("text", "one of TAKT_MAINTENANCE_LOCK_FILE's files (none: all)")},
        ),
    )
}


def validate_system(target: str, params: Mapping[str, object]) -> SystemFunction:
    """The system function a job names with the params it is given, or
    TriggerError naming `target` (not a system function) or `params` (one
    it does not take, or of the wrong type)."""
    function = SYSTEM_FUNCTIONS.get(target)
    if function is None:
        known = ", ".join(SYSTEM_FUNCTIONS)
        if not target:
            raise TriggerError(
                "target",
                gettext_noop("no target is a system function (one of %(known)s)"),
                known=known,
            )
        raise TriggerError(
            "target",
            gettext_noop("%(target)r is not a system function (one of %(known)s)"),
            target=target,
            known=known,
        )
    unknown = sorted(set(params) - set(function.params))
    if unknown:
        takes = ", ".join(function.params) or "none"
        raise TriggerError(
            "params",
            gettext_noop("%(target)s does not take %(unknown)s (it takes: %(takes)s)"),
            target=target,
            unknown=", ".join(unknown),
            takes=takes,
        )
    for name, value in params.items():
        _check(name, function.params[name], value)
    return function


def _check(name: str, param: Param, value: object) -> None:
    if param.kind == "text" and not isinstance(value, str):
        raise TriggerError(
            "params", gettext_noop("%(name)s: a string, got %(value)r"), name=name, value=value
        )
    if param.kind == "sections":
        if (
            not isinstance(value, list)
            or not value
            or any(v not in MAINTENANCE_SECTIONS for v in value)
        ):
            raise TriggerError(
                "params",
                gettext_noop("%(name)s: a list of sections of %(sections)s, got %(value)r"),
                name=name,
                sections=", ".join(MAINTENANCE_SECTIONS),
                value=value,
            )
