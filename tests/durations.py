"""How long each test file takes, for ordering the parallel run.

`make test` runs the files on several xdist workers, each file whole on one
worker (its module-scoped worker, beat, web server and browser are started
once). The files are handed out longest first, so that the long e2e, chaos
and browser files start at once and the many short ones fill the gaps at the
end, rather than one long file starting last and running alone.

tests/durations.json holds each file's seconds, measured on SQLite on the
2-core machine. Refresh it after adding or changing long tests:

    make test ARGS="--junitxml=var/junit.xml"
    .venv/bin/python -m tests.durations var/junit.xml

A file missing from it counts as its directory's typical file.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")
# Seconds assumed for a file not yet measured, by its directory.
TYPICAL_S = {"unit": 1.0, "integration": 5.0, "e2e": 20.0, "browser": 15.0, "chaos": 150.0}


def load() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(FILE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def estimate(path: str, known: dict[str, float]) -> float:
    """Seconds the file at `path` (tests/<dir>/test_x.py) is expected to take."""
    if path in known:
        return known[path]
    parts = path.split("/")
    return TYPICAL_S.get(parts[1] if len(parts) > 2 else "", 5.0)


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per test file from a pytest --junitxml report."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        module = [p for p in case.get("classname", "").split(".") if not p[:1].isupper()]
        seconds["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {path: round(s, 1) for path, s in sorted(seconds.items())}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.durations JUNIT_XML")
    FILE.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {FILE}")
