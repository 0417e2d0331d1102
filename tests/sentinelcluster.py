"""A private Redis Sentinel set-up for the failover tests (F-85): a master,
one replica (replicaof) and three sentinels (`redis-server <conf>
--sentinel`, quorum 2, down after 1 s), all real processes on free ports of
127.0.0.1 with their files in a temporary directory. Never the machine's
own Redis."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import redis

from tests.processes import Proc, free_port

MASTER_NAME = "takt-test-master"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
QUORUM = 2


def _wait(predicate, timeout: float, what: str, procs: list[Proc]):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except redis.RedisError:
            value = None
        if value:
            return value
        for proc in procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited early:\n{proc.log()[-3000:]}")
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name}\n{p.log()[-1500:]}" for p in procs)
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}\n{tails}")
        time.sleep(0.1)


def _address(reply: tuple[bytes | str, bytes | int]) -> tuple[str, int]:
    host, port = reply
    return (host.decode() if isinstance(host, bytes) else host), int(port)


class SentinelCluster:
    """`start()` returns when the replica is in sync and every sentinel
    knows the replica and the two other sentinels (so a failover can be
    agreed); `master_address()` asks the sentinels; `kill_master()` sends
    SIGKILL; `wait_for_failover(old)` returns the promoted master's
    address; `stop()` ends every process."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server")
        self.binary = binary
        self.workdir = workdir
        self.master_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports: list[int] = []  # chosen as each starts (start())
        self.procs: dict[str, Proc] = {}

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", port) for port in self.sentinel_ports]

    @property
    def sentinels_setting(self) -> str:
        """The value of REDIS_SENTINELS for this set-up."""
        return ",".join(f"{host}:{port}" for host, port in self.sentinels)

    def _server(self, name: str, port: int, *extra: str) -> None:
        data = self.workdir / name
        data.mkdir(exist_ok=True)
        argv = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data)]
        argv += ["--save", "", "--appendonly", "no", *extra]
        self.procs[name] = Proc(name, argv, dict(os.environ), self.workdir)

    def _sentinel(self, index: int, port: int) -> None:
        conf = self.workdir / f"sentinel-{index}.conf"  # sentinel rewrites it: writable
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.workdir}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        argv = [self.binary, str(conf), "--sentinel"]
        self.procs[f"sentinel-{index}"] = Proc(
            f"sentinel-{index}", argv, dict(os.environ), self.workdir
        )

    def start(self, timeout: float = 30) -> None:
        self._server("master", self.master_port)
        self._server(
            "replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port)
        )
        procs = list(self.procs.values())
        replica = redis.Redis(port=self.replica_port, socket_timeout=1)
        _wait(
            lambda: replica.info("replication").get("master_link_status") == "up",
            timeout,
            "the replica to sync with the master",
            procs,
        )
        for index in range(3):
            self.sentinel_ports.append(self._start_sentinel(index))
        procs = list(self.procs.values())
        for port in self.sentinel_ports:
            client = redis.Redis(port=port, socket_timeout=1)
            _wait(
                lambda c=client: self._knows_all(c), timeout, f"sentinel {port} to know all", procs
            )

    def _start_sentinel(self, index: int, attempts: int = 5) -> int:
        """Start sentinel `index` on a free port; its port. A port found free
        can be taken before the sentinel binds it (the replica's own
        connection to the master draws from the same ephemeral range): then
        it exits at once, and another port is tried."""
        for _ in range(attempts):
            port = free_port()
            self._sentinel(index, port)
            proc = self.procs[f"sentinel-{index}"]
            client = redis.Redis(port=port, socket_timeout=1)
            deadline = time.monotonic() + 10
            while proc.popen.poll() is None and time.monotonic() < deadline:
                try:
                    if client.ping():
                        return port
                except redis.RedisError:
                    time.sleep(0.05)
            if proc.popen.poll() is None or "Address already in use" not in proc.log():
                raise RuntimeError(f"sentinel-{index} did not start:\n{proc.log()[-3000:]}")
        raise RuntimeError(f"sentinel-{index}: no free port after {attempts} attempts")

    @staticmethod
    def _knows_all(client: redis.Redis) -> bool:
        replicas = client.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)
        others = client.execute_command("SENTINEL", "SENTINELS", MASTER_NAME)
        return len(replicas) == 1 and len(others) == 2

    def master_address(self) -> tuple[str, int] | None:
        """The master's address as the first answering sentinel names it."""
        for _, port in self.sentinels:
            try:
                client = redis.Redis(port=port, socket_timeout=1)
                return _address(client.sentinel_get_master_addr_by_name(MASTER_NAME))
            except (redis.RedisError, TypeError):
                continue
        return None

    def kill_master(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """SIGKILL the current master (no shutdown, nothing saved); with
        SIGSTOP it hangs instead, its connections open and silent, like a
        master cut off by the network."""
        address = self.master_address()
        name = "master" if address and address[1] == self.master_port else "replica"
        proc = self.procs[name]
        os.kill(proc.pid, sig)
        if sig == signal.SIGKILL:
            proc.popen.wait(timeout=10)

    def wait_for_failover(self, old: tuple[str, int], timeout: float = 20) -> tuple[str, int]:
        """Until every sentinel names a master other than `old`, and that
        master answers as a master; returns its address."""

        def promoted() -> tuple[str, int] | None:
            named = set()
            for _, port in self.sentinels:
                client = redis.Redis(port=port, socket_timeout=1)
                named.add(_address(client.sentinel_get_master_addr_by_name(MASTER_NAME)))
            if len(named) != 1 or old in named:
                return None
            (address,) = named
            role = redis.Redis(host=address[0], port=address[1], socket_timeout=1).info(
                "replication"
            )
            return address if role.get("role") == "master" else None

        alive = [p for p in self.procs.values() if p.popen.poll() is None]
        return _wait(promoted, timeout, "the sentinels to promote the replica", alive)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped master cannot take SIGTERM
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-2000:]}" for p in self.procs.values())
