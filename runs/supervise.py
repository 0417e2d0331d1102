"""The supervisor between a worker and a command job's program (F-02): a
small stdlib-only script that runs/commands.py starts with ``python -S -E``
as the leader of a new session and process group, and that starts the
program in that same group. It exists so that no part of a command
outlives the worker process that ran it unseen:

* the kernel sends it SIGTERM the moment the worker's pool process dies,
  SIGKILL included (Linux's parent-death signal, PR_SET_PDEATHSIG);
* on SIGTERM (that, a timeout, a cancel) it sends SIGTERM to the whole
  group, waits up to the grace period for every other member to exit
  (grandchildren too), then SIGKILLs the group, itself with it;
* it tells the worker on a status pipe whether the program started ("ok
  <pid>") or why not ("error <reason>"), so a program that cannot start is
  told apart from one that exits 127;
* it applies the nice value, then exits with the program's exit code, or
  dies by the signal that killed the program.

Usage: supervise.py STATUS_FD PARENT_PID NICE GRACE_S SHELL -- ARGV...
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    status_fd, parent, nice, grace_s, shell = (
        int(argv[1]),
        int(argv[2]),
        int(argv[3]),
        float(argv[4]),
        argv[5] == "1",
    )
    command = argv[7:]
    stopping: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if stopping:
            return
        stopping.append(signum)
        _stop_group(grace_s)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (AttributeError, OSError):  # not Linux: a dead worker's command runs on
        pass
    if os.getppid() != parent:  # the worker died before the line above
        _report(status_fd, "error the worker process that started it is gone")
        return 1
    try:
        if nice:
            os.nice(nice)
        program = subprocess.Popen(command[0] if shell else command, shell=shell)
    except OSError as exc:
        _report(status_fd, f"error {exc.strerror or exc}")
        return 127
    _report(status_fd, f"ok {program.pid}")
    code = program.wait()
    if code < 0:  # killed by a signal: die by it too, so the worker sees the same
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _report(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode(errors="replace"))
    os.close(fd)


def _stop_group(grace_s: float) -> None:
    """SIGTERM to the group; once every other member is gone (or the grace
    is over) SIGKILL to the group, this process included."""
    me = os.getpid()
    group = os.getpgrp()
    os.killpg(group, signal.SIGTERM)  # ignored here: the handler is running
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        if not _others_in_group(group, me):
            os._exit(128 + signal.SIGTERM)
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)


def _reap() -> None:
    """Collect the program's exit status (and any child's), so an exited
    one does not count as a member."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _others_in_group(group: int, me: int) -> bool:
    """Whether a live process other than this one is in the group (from
    /proc; a zombie is not live)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            return True
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv))
