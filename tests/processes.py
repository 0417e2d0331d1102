"""Child processes for the end-to-end tests and the benchmarks: a free port,
a fresh process's environment, and a process that logs to a file and is
stopped with its process group."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import BinaryIO

import redis

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie not yet reaped is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# Ports for the servers the tests start (Redis, PostgreSQL, runserver,
# Flower, SMTP). Two things may take a port between its pick and the
# server's bind, and neither may here:
# * an outgoing connection's local port: the kernel takes those from its
#   ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default),
#   so the ports handed out lie below it;
# * another pytest process (an xdist worker, or a second suite beside this
#   one): each xdist worker has a block of its own, and each process starts
#   at a random place in its block and hands the ports out in turn.
# A port something already listens on is passed over (the bind check).
PORT_BLOCK = 800


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class _Ports:
    def __init__(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
        index = int(worker) if worker.isdigit() else 0
        top = _ephemeral_low()
        blocks = max((top - 10_000) // PORT_BLOCK, 1)
        self.first = top - (index % blocks + 1) * PORT_BLOCK
        self.next = random.randrange(PORT_BLOCK)

    def take(self) -> int:
        for _ in range(PORT_BLOCK):
            port = self.first + self.next % PORT_BLOCK
            self.next += 1
            if port > 1024 and _bindable(port):
                return port
        raise RuntimeError(f"no free port in {self.first}-{self.first + PORT_BLOCK - 1}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_PORTS: _Ports | None = None


def free_port() -> int:
    """A port no server listens on and no other test process will pick
    (see PORT_BLOCK above); a test that needs a port where nothing answers
    may use one too."""
    global _PORTS
    if _PORTS is None:
        _PORTS = _Ports()
    return _PORTS.take()


def clean_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """The environment of a fresh process: none of the shell's DJANGO_*,
    EMAIL_* or TAKT_* variables, no var/local.env, state in `tmp_path`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "EMAIL_", "TAKT_", "DEFAULT_FROM"))
    }
    env.update(TAKT_LOCAL_ENV_FILE="", TAKT_VAR_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(variables)
    return env


class Proc:
    """A child process in its own session, writing to a log file in
    `log_dir`; `stop()` sends SIGTERM (then SIGKILL) to its whole group."""

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path = ROOT
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
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


class RedisServer:
    """redis-server on a fixed port with no persistence (--save "" and
    --appendonly no): a restart starts empty, like `make run`'s Redis. For
    the tests that restart or kill Redis (the session's is never)."""

    def __init__(self, port: int, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server")
        self.binary, self.port, self.workdir = binary, port, workdir
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: BinaryIO | None = None
        self.starts = 0

    def start(self, timeout_s: float = 10) -> None:
        self.starts += 1
        self.log = log = (self.workdir / f"redis-{self.starts}.log").open("wb")
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--appendonly", "no", "--dir", str(self.workdir)]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        """SIGTERM: with no persistence, a restart starts empty all the same."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()
