"""Triggers from outside the clock (F-16, F-17): which file names a watched
folder's trigger takes, what a RUN request file asks for, and when a file
has settled. Part of the pure core: no Django, no file system, no clock
reads (callers pass `now` and what they saw on disk).

The engine (runs/watching.py) feeds what watchdog reports and what `stat`
says into a `Settler`; a file is taken once it has been left alone (no
event, the same size and modification time) for the trigger's settle time,
so a file still being written, or written in chunks and renamed, starts one
run, with its final name and size.
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobs.core.cron import TriggerError, gettext_noop, same

SETTLE_MAX_SECONDS = 3600
RUN_SUFFIX = ".run"
DEFAULT_RUN_PREFIX = "Takt"
_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,50}$")


@dataclass(frozen=True)
class FileSpec:
    """A file trigger: a file whose name matches `pattern` created, changed
    or renamed into `folder` (or below it, `recursive`) starts a run."""

    folder: str
    pattern: str = "*"
    recursive: bool = False
    settle_seconds: int = 2


def validate_file_spec(spec: FileSpec) -> FileSpec:
    """The spec with a tidy folder (no trailing slash, `..` resolved) and
    pattern. Raises TriggerError naming "watch_folder", "watch_pattern" or
    "settle_seconds". Whether the folder exists is the caller's question."""
    folder = (spec.folder or "").strip()
    if not folder:
        raise TriggerError("watch_folder", gettext_noop("required for a file trigger"))
    if not folder.startswith("/"):
        raise TriggerError(
            "watch_folder",
            gettext_noop("must be an absolute path (starting with /), got %(folder)r"),
            folder=folder,
        )
    folder = posixpath.normpath(folder)
    if printable(folder) != folder:
        raise TriggerError(
            "watch_folder",
            gettext_noop("%(folder)s has a control character in it: give the folder's plain name"),
            folder=printable(folder),
        )
    pattern = (spec.pattern or "").strip()
    if printable(pattern) != pattern:
        raise TriggerError(
            "watch_pattern",
            gettext_noop("%(pattern)s has a control character in it"),
            pattern=printable(pattern),
        )
    if not pattern:
        raise TriggerError(
            "watch_pattern", gettext_noop("required: a glob for the file's name, e.g. *.csv")
        )
    if "/" in pattern:
        raise TriggerError(
            "watch_pattern",
            gettext_noop(
                "%(pattern)r is a path: give a pattern for the file's name (e.g. *.csv); use the folder and 'include subfolders' for where"
            ),
            pattern=pattern,
        )
    settle = spec.settle_seconds
    if (
        not isinstance(settle, int)
        or isinstance(settle, bool)
        or not 0 <= settle <= SETTLE_MAX_SECONDS
    ):
        raise TriggerError(
            "settle_seconds",
            gettext_noop("must be a whole number from 0 to %(settle_max_seconds)s, got %(settle)r"),
            settle_max_seconds=SETTLE_MAX_SECONDS,
            settle=settle,
        )
    return FileSpec(folder, pattern, bool(spec.recursive), settle)


def takes(spec: FileSpec, path: str) -> bool:
    """Whether a file at `path` (absolute) starts the trigger: inside the
    folder (directly, or below it when recursive), its name matching the
    pattern (case-sensitive, as file names are), not hidden (a name starting
    with "." is how editors and uploads write a file before they rename it)."""
    folder = spec.folder.rstrip("/") or "/"
    parent, name = posixpath.split(path)
    if not name or name.startswith("."):
        return False
    if parent != folder:
        if not spec.recursive or not parent.startswith(folder.rstrip("/") + "/"):
            return False
    return fnmatch.fnmatchcase(name, spec.pattern)


def describe_file(spec: FileSpec, translate: Callable[[str], str] = same) -> str:
    """The trigger in words, for the admin and the API."""
    if spec.recursive and spec.settle_seconds:
        words = gettext_noop(
            "when a file matching %(pattern)s appears or changes in %(folder)s or a folder"
            " below it, once unchanged for %(settle)s s"
        )
    elif spec.recursive:
        words = gettext_noop(
            "when a file matching %(pattern)s appears or changes in %(folder)s or a folder below it"
        )
    elif spec.settle_seconds:
        words = gettext_noop(
            "when a file matching %(pattern)s appears or changes in %(folder)s, once unchanged"
            " for %(settle)s s"
        )
    else:
        words = gettext_noop("when a file matching %(pattern)s appears or changes in %(folder)s")
    return translate(words) % {
        "pattern": spec.pattern,
        "folder": spec.folder,
        "settle": spec.settle_seconds,
    }


def check_run_prefix(prefix: str) -> str:
    """TAKT_RUN_FILE_PREFIX: letters, digits, _ . - (1 to 50). Raises
    TriggerError("TAKT_RUN_FILE_PREFIX")."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise TriggerError(
            "TAKT_RUN_FILE_PREFIX",
            gettext_noop("must be 1 to 50 letters, digits, '_', '.' or '-', got %(prefix)r"),
            prefix=prefix,
        )
    return prefix


def run_request(name: str, prefix: str = DEFAULT_RUN_PREFIX) -> int | str | None:
    """What a file named `name` in a RUN-file folder asks for (F-17): the
    job id of `<prefix><id>.RUN` (prefix and suffix case-insensitive); a
    string saying why for a name that looks like a request but is not one
    ("Takt.RUN", "TaktX.RUN"); None for any other file, which is left alone."""
    if not name.lower().endswith(RUN_SUFFIX) or name.startswith("."):
        return None
    stem = name[: -len(RUN_SUFFIX)]
    if not stem.lower().startswith(prefix.lower()):
        return None
    rest = stem[len(prefix) :]
    if rest.isascii() and rest.isdigit() and int(rest) > 0:
        return int(rest)
    return f"{name!r} is not a run request: name it {prefix}<job id>.RUN, e.g. {prefix}22.RUN"


@dataclass
class _Seen:
    size: int
    mtime_ns: int
    since: datetime  # when the file was last seen to change (event or stat)
    event: str


@dataclass
class Settler:
    """The files of one folder waiting to settle. `saw` records an event or
    a look at a file; `ready` returns those left alone for `settle` (same
    size and modification time, no event since), oldest first, and forgets
    them: each settled state of a file is handed out once."""

    settle: timedelta
    pending: dict[str, _Seen] = field(default_factory=dict)

    def saw(self, path: str, *, size: int, mtime_ns: int, event: str, now: datetime) -> None:
        before = self.pending.get(path)
        if before is None or (before.size, before.mtime_ns) != (size, mtime_ns) or event != "seen":
            kind = before.event if before is not None and event == "modified" else event
            self.pending[path] = _Seen(size, mtime_ns, now, kind)

    def gone(self, path: str) -> None:
        """The file was deleted or renamed away before it settled."""
        self.pending.pop(path, None)

    def waiting(self) -> list[str]:
        return list(self.pending)

    def ready(self, now: datetime) -> list[tuple[str, int, int, str]]:
        """(path, size, mtime_ns, event) of the settled files."""
        done = [
            (path, seen) for path, seen in self.pending.items() if now - seen.since >= self.settle
        ]
        done.sort(key=lambda item: item[1].since)
        for path, _ in done:
            del self.pending[path]
        return [(path, s.size, s.mtime_ns, s.event) for path, s in done]


def dedupe_key(path: str, size: int, mtime_ns: int) -> str:
    """One run per state of a file, whichever watcher saw it: the key of the
    run it starts (enqueue_job's dedupe_key, F-43)."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return f"file:{digest}:{size}:{mtime_ns}"


# --- where a watcher may look, and what it may print ----------------------

# With TAKT_WATCH_ROOTS unset, folders a watcher never watches: these and
# everything below them (the system's own files, other users' secrets) ...
SYSTEM_TREES = (
    "/root", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/usr", "/bin", "/sbin",
    "/lib", "/lib32", "/lib64", "/libx32", "/snap", "/var/lib", "/var/log", "/var/cache",
    "/var/spool", "/var/mail",
)  # fmt: skip
# ... and these themselves (the folders below them are fine: /home/erp/inbox).
SYSTEM_FOLDERS = ("/", "/home", "/var", "/tmp", "/var/tmp", "/srv", "/opt", "/mnt", "/media")


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def root_problem(real_folder: str, real_roots: Sequence[str]) -> str | None:
    """Why a watcher may not watch `real_folder` (the folder with its
    symbolic links resolved), if it may not: with roots (TAKT_WATCH_ROOTS,
    resolved too) it must be one of them or below one; without, it must not
    be a system folder (SYSTEM_TREES and below, SYSTEM_FOLDERS themselves).
    An English reason, the caller translates and fills in %(folder)s and
    %(roots)s."""
    if real_roots:
        if any(_below(real_folder, root) for root in real_roots):
            return None
        return gettext_noop(
            "%(folder)s is outside the folders Takt may watch (TAKT_WATCH_ROOTS: %(roots)s)"
        )
    if real_folder in SYSTEM_FOLDERS or any(_below(real_folder, t) for t in SYSTEM_TREES):
        return gettext_noop(
            "%(folder)s is a system folder: Takt does not watch it (TAKT_WATCH_ROOTS names"
            " the folders it may watch)"
        )
    return None


def done_parts(request_folder: str, done: str) -> tuple[str, ...]:
    """The folder a consumed RUN file goes to (TAKT_RUN_FILE_DONE_FOLDER),
    as the names of the folders below `request_folder` (empty: delete the
    file). A relative `done` is below the request folder; an absolute one
    must be inside it. Raises ValueError saying why not (`..`, outside)."""
    if not done:
        return ()
    if posixpath.isabs(done):
        relative = posixpath.relpath(posixpath.normpath(done), posixpath.normpath(request_folder))
    else:
        relative = posixpath.normpath(done)
    parts = tuple(p for p in relative.split("/") if p not in ("", "."))
    if not parts or ".." in parts:
        raise ValueError(
            f"{done!r} is not a folder inside the request folder {request_folder}: give a"
            " name such as 'done'"
        )
    return parts


def printable(text: str) -> str:
    """`text` with every character that a terminal or a log reader would
    not show as itself (control characters such as ESC, C1 codes, bidi
    overrides, bytes that were not UTF-8) written as Python writes it in a
    string (\\x1b, \\u202e, \\udcff), so a file name cannot colour, move or
    rewrite what an operator reads. Other text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )
