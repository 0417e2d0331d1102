"""The chaos test's result: the criteria and figures as a markdown table,
and whether every criterion held."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOT_A_CRITERION = object()


@dataclass
class Report:
    rows: list[tuple[str, Any, str, bool | None]] = field(default_factory=list)
    lags: list[tuple[str, int, float, float, float]] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)
    commit: str = ""
    header: str = ""

    def row(
        self, name: str, value: Any, required: Any = NOT_A_CRITERION, *, ok: bool | None = None
    ) -> None:
        """A figure; with `required`, a criterion (value == required unless
        `ok` says otherwise)."""
        if required is NOT_A_CRITERION:
            self.rows.append((name, value, "", None))
            return
        held = (value == required) if ok is None else ok
        self.rows.append((name, value, str(required), held))

    def lag(self, phase: str, count: int, p50: float, p99: float, worst: float) -> None:
        self.lags.append((phase, count, p50, p99, worst))

    @property
    def passed(self) -> bool:
        return all(ok for *_, ok in self.rows if ok is not None)

    @property
    def failures(self) -> list[str]:
        return [
            f"{name}: {value} (required {req})" for name, value, req, ok in self.rows if ok is False
        ]

    def markdown(self) -> str:
        out = []
        if self.header:
            out += [self.header, ""]
        if self.commit:
            out += [f"Commit: `{self.commit}`", ""]
        out += ["| check | value | required | |", "|---|---|---|---|"]
        for name, value, req, ok in self.rows:
            mark = "" if ok is None else ("ok" if ok else "**FAIL**")
            out.append(f"| {name} | {value} | {req} | {mark} |")
        out += [
            "",
            "| start lag by phase of the fire time | runs | p50 s | p99 s | max s |",
            "|---|---|---|---|---|",
        ]
        for phase, count, p50, p99, worst in self.lags:
            out.append(f"| {phase} | {count} | {p50:.2f} | {p99:.2f} | {worst:.2f} |")
        shown = {k: v for k, v in self.examples.items() if v and k != "succeeded"}
        if shown:
            out += ["", "Examples:"]
            out += [f"- {k}: {', '.join(v[:5])}" for k, v in sorted(shown.items())]
        out.append("")
        out.append("PASSED" if self.passed else "FAILED: " + "; ".join(self.failures))
        return "\n".join(out)
