"""Child processes for the end-to-end tests and the benchmarks: a free port,
and a process that logs to a file and is stopped with its process group."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie not yet reaped is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """A child process in its own session, writing to a log file in
    `log_dir`; `stop()` sends SIGTERM (then SIGKILL) to its whole group."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float) -> None:
        """Poll the log until `text` appears; raise with the log's tail if
        the process exits or `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} not ready after {timeout} s:\n{self.log()[-4000:]}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
            except ProcessLookupError:
                pass
        self._log.close()


class PrivateRedis:
    """A redis-server without persistence on a fixed free port, which the
    test can restart (the session's Redis is never restarted)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server") or "redis-server"
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--appendonly", "no", "--dir", str(self.workdir)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while not _pings(client):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the private redis-server on port {self.port} did not start")
            time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
