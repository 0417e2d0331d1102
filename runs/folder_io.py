"""What the watcher (runs/watching.py) does on disk in a watched folder,
without following a symbolic link it did not expect.

A watched folder is written by others (an upload, an ERP, a script on
another machine), and the watcher may run as a privileged user: a link
planted there must not make it read, overwrite or move a file elsewhere.
So:

- a file is taken only when it is a regular file, seen with `lstat`, and
  no folder between the watched folder and it is a link (a link's target
  never becomes a run's `path`);
- the `.error` file beside a refused RUN file is opened relative to the
  folder with O_NOFOLLOW, and written only if it is a plain file with one
  name (not a link, a FIFO, or a hard link to another file);
- a consumed RUN file is moved into the done folder through descriptors:
  each folder below the request folder is opened with O_NOFOLLOW, so a
  `done` that is a link is refused, and the file is deleted instead.

The folder itself is what the operator configured (it may be a link, say
/srv/inbox -> /data/inbox); jobs.validation.folder_problem checks where it
resolves to.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterable, Sequence

from jobs.core.watch import printable

log = logging.getLogger("takt.watching")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW


def regular_state(path: str, folder: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of the regular file at `path` inside the watched
    `folder`; None when it is gone, not a regular file (a symbolic link, a
    FIFO, a folder), or sits below a folder of `folder` that is a link."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or not _plain_below(folder, os.path.dirname(path)):
        return None
    return info.st_size, info.st_mtime_ns


def is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _plain_below(folder: str, parent: str) -> bool:
    """No folder between `folder` and `parent` (a folder inside it) is a link."""
    if parent == folder:
        return True
    relative = os.path.relpath(parent, folder)
    if relative.startswith(".."):
        return False
    return os.path.realpath(parent) == os.path.join(os.path.realpath(folder), relative)


def list_files(folder: str, *, recursive: bool) -> Iterable[str]:
    """The names in `folder` (and, `recursive`, in the folders below it
    that are not hidden; links to folders are not followed)."""
    for root, dirs, names in os.walk(folder):
        for name in names:
            yield os.path.join(root, name)
        if not recursive:
            return
        dirs[:] = [d for d in dirs if not d.startswith(".")]


def write_beside(path: str, suffix: str, text: str) -> str | None:
    """Write `text` into `<path><suffix>` (in the folder of `path`), made or
    replaced; None when written, else why not (a link or another kind of
    file is there: it is left as it is)."""
    folder, name = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        folder_fd = os.open(folder, _DIR_FLAGS)
        try:
            fd = os.open(name + suffix, flags, 0o644, dir_fd=folder_fd)
        finally:
            os.close(folder_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "it is a symbolic link (not followed)"
        if exc.errno == errno.ENXIO:
            return "it is a FIFO"
        return exc.strerror or str(exc)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "it is not a regular file"
        if info.st_nlink != 1:
            return "it is a hard link to another file"
        os.ftruncate(fd, 0)
        out.write(text)
    return None


def consume(path: str, done: Sequence[str], *, stamp: str) -> None:
    """Take the RUN file at `path` out of its folder: delete it (`done`
    empty), or move it into the folder `done` names below its folder (made
    when needed; `<name>.<stamp>` when that name is taken). A done folder
    that is a link or a file is not used: the file is deleted, and the log
    says why."""
    folder, name = os.path.split(path)
    try:
        folder_fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        log.warning("could not consume the run file %s: %s", printable(path), exc)
        return
    try:
        if done:
            try:
                done_fd = _open_below(folder_fd, done)
            except OSError as exc:
                why = exc.strerror if isinstance(exc, _NotAFolder) else exc
                log.warning(
                    "did not move the run file %s into %s (%s): deleted it instead",
                    printable(path),
                    printable(os.path.join(folder, *done)),
                    why,
                )
            else:
                try:
                    _move(folder_fd, name, done_fd, stamp)
                finally:
                    os.close(done_fd)
                return
        os.unlink(name, dir_fd=folder_fd)
    except FileNotFoundError:
        pass  # consumed by another watcher (a network folder seen twice)
    except OSError as exc:
        log.warning("could not consume the run file %s: %s", printable(path), exc)
    finally:
        os.close(folder_fd)


class _NotAFolder(OSError):
    """A name on the way to the done folder is a link or a file."""


def _open_below(folder_fd: int, parts: Sequence[str]) -> int:
    """A descriptor of the folder `parts` below `folder_fd`, each made when
    missing and opened with O_NOFOLLOW (so a link swapped in after the look
    is refused too). Raises OSError (_NotAFolder: a link or a file there)."""
    fd = os.dup(folder_fd)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                below = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                linked = stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
                what = "a symbolic link (not followed)" if linked else "not a folder"
                raise _NotAFolder(exc.errno, f"{printable(part)} is {what}") from None
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _move(folder_fd: int, name: str, done_fd: int, stamp: str) -> None:
    dest = name
    try:
        os.lstat(dest, dir_fd=done_fd)
        dest = f"{name}.{stamp}"
    except FileNotFoundError:
        pass
    os.rename(name, dest, src_dir_fd=folder_fd, dst_dir_fd=done_fd)
