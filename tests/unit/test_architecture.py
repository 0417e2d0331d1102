"""The rings of STYLE.md, checked on the source (no import of the code).

Every module of the three apps and of scheduler_project belongs to a ring,
by where it lives:

====  ==============  ========================================================
ring  name            modules
====  ==============  ========================================================
0     pure core       ``jobs/core``, ``runs/core``, ``heartbeats/core``: the
                      schedule, the policies' rules and the decisions, as
                      plain functions of their facts (stdlib, the cron
                      libraries, other pure modules; no clock reads)
1     infrastructure  ``scheduler_project``'s settings, Redis and database
                      connection helpers
2     definitions     the rest of ``jobs``: what runs and when (models,
                      validation, definitions, jobs declared in code)
3     engine          the rest of ``runs``: the beat, dispatch, admission,
                      execution, locks, recovery
4     monitoring      the rest of ``heartbeats``: heartbeats, alerts,
                      notifications, "why didn't it run?"
5     glue            every ``admin``, ``api``, ``management`` and
                      ``templatetags`` package, the apps' AppConfigs, the
                      ``jobs`` package's public API, its testing helpers
                      (``jobs.testing``, ``jobs.pytest_plugin``) and the
                      project's URLs, middleware and Celery app
====  ==============  ========================================================

A module imports only from its own ring and the rings below it. The import
graph, function-level imports included (those under ``TYPE_CHECKING`` are
annotations and left out), has no cycle: no import sits inside a function
to dodge one.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
APPS = ("jobs", "runs", "heartbeats", "scheduler_project")
RINGS = ("pure core", "infrastructure", "definitions", "engine", "monitoring", "glue")
PURE, INFRASTRUCTURE, GLUE = 0, 1, 5
APP_RING = {"jobs": 2, "runs": 3, "heartbeats": 4}
GLUE_PACKAGES = {"admin", "api", "management", "templatetags"}
# The apps' AppConfigs, the URLs a project includes (jobs.urls), and the
# testing helpers for users' suites (F-96).
GLUE_MODULES = {"apps", "testing", "pytest_plugin", "urls"}
PROJECT_GLUE = {"urls", "api_urls", "middleware", "celery", "wsgi"}
# What the pure core may import besides the standard library and itself.
PURE_THIRD_PARTY = {"cronsim", "cron_descriptor"}
CLOCK_READS = (".now(", ".today(", "utcnow", "time.time(", "monotonic(")


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a project module, or the top-level name of another package
    line: int
    in_function: bool
    type_checking: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


MODULES = project_modules()


def ring_of(module: str) -> int:
    parts = module.split(".")
    app = parts[0]
    if app == "scheduler_project":  # the package itself loads the Celery app
        return INFRASTRUCTURE if len(parts) > 1 and parts[1] not in PROJECT_GLUE else GLUE
    if module == "jobs" or set(parts[1:]) & GLUE_PACKAGES or parts[-1] in GLUE_MODULES:
        return GLUE
    if len(parts) > 1 and parts[1] == "core":
        return PURE
    return APP_RING[app]


def _resolve(name: str) -> str:
    """The project module a dotted name is, or lies in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str) -> Iterator[Import]:
    tree = ast.parse(MODULES[module].read_text())

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield _one(alias.name, child.lineno, in_function, type_checking)
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0, f"{module}:{child.lineno}: use an absolute import"
                base = child.module or ""
                for alias in child.names:
                    dotted = f"{base}.{alias.name}"
                    target = dotted if dotted in MODULES else base
                    yield _one(target, child.lineno, in_function, type_checking)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.body:
                    yield from visit(
                        ast.Module(body=[statement], type_ignores=[]), in_function, True
                    )
                for statement in child.orelse:
                    yield from visit(statement, in_function, type_checking)
            else:
                function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from visit(child, in_function or function, type_checking)

    def _one(name: str, line: int, in_function: bool, type_checking: bool) -> Import:
        top = name.split(".")[0]
        target = _resolve(name) if top in APPS else top
        return Import(module, target, line, in_function, type_checking)

    yield from visit(tree, False, False)


@functools.cache
def all_imports() -> list[Import]:
    """Every import of every module, parsed when a test first asks (not at
    collection, which every xdist worker pays)."""
    return [imp for module in MODULES for imp in imports_of(module)]


def test_every_module_has_a_ring() -> None:
    assert {ring_of(m) for m in MODULES} == set(range(len(RINGS)))


def test_imports_point_down_the_rings() -> None:
    wrong = [
        f"{imp.importer} ({RINGS[ring_of(imp.importer)]}) imports {imp.target}"
        f" ({RINGS[ring_of(imp.target)]}), line {imp.line}"
        for imp in all_imports()
        if imp.target in MODULES and ring_of(imp.target) > ring_of(imp.importer)
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ring_of(m) == PURE))
def test_the_pure_core_is_pure(module: str) -> None:
    """Standard library, the cron libraries and other pure modules only;
    every time-dependent function takes `now` instead of reading a clock."""
    allowed = set(sys.stdlib_module_names) | PURE_THIRD_PARTY
    for imp in imports_of(module):
        if imp.target in MODULES:
            assert ring_of(imp.target) == PURE, f"{module}:{imp.line} imports {imp.target}"
        else:
            assert imp.target in allowed, f"{module}:{imp.line} imports {imp.target}"
    source = ast.unparse(ast.parse(MODULES[module].read_text()))
    assert not [clock for clock in CLOCK_READS if clock in source]


def test_the_pure_core_loads_no_framework() -> None:
    """Importing every pure module (their packages included) loads neither
    Django nor Celery nor a Redis client."""
    pure = sorted(m for m in MODULES if ring_of(m) == PURE)
    code = f"import sys; import {', '.join(pure)}; print(*{{m.split('.')[0] for m in sys.modules}})"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert not {"django", "celery", "kombu", "redis", "rest_framework"} & set(run.stdout.split())


def _cycle() -> list[str] | None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in all_imports():
        if imp.target in MODULES and imp.target != imp.importer and not imp.type_checking:
            graph[imp.importer].add(imp.target)
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := walk(module)):
            return found
    return None


def test_no_import_cycle() -> None:
    """Counting imports inside functions: none of them may be the only thing
    that keeps two modules from importing each other."""
    cycle = _cycle()
    assert cycle is None, " -> ".join(cycle or [])
