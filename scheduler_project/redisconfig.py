"""Where Redis is: one REDIS_URL, or a master found through Redis Sentinel.

With REDIS_SENTINELS empty (the default) every process uses REDIS_URL, as
before. With REDIS_SENTINELS=host:port,host:port the broker (kombu's
``sentinel://`` transport) and Takt's own client (runs/redis_client.py) ask
the sentinels for the current master of REDIS_SENTINEL_MASTER, and follow it
to the new master after a failover. Parsed when the settings load; a bad
value raises ImproperlyConfigured naming the variable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

# A host name, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")
_MASTER = re.compile(r"^[A-Za-z0-9._-]+$")
BROKER_SOCKET_TIMEOUT_S = 3
BROKER_HEALTH_CHECK_S = 2


@dataclass(frozen=True)
class SentinelConfig:
    """The sentinels to ask, the name of the master they watch, the
    master's password and database, and the sentinels' own password
    (empty: none)."""

    sentinels: tuple[tuple[str, int], ...]
    master: str = "mymaster"
    password: str = field(default="", repr=False)
    sentinel_password: str = field(default="", repr=False)
    db: int = 0

    def broker_url(self) -> str:
        """kombu's URL for the sentinel transport: one ``sentinel://`` per
        sentinel, separated by ';'. Each carries the master's password and
        database (kombu reads them from the first)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return ";".join(f"sentinel://{auth}{_address(*pair)}/{self.db}" for pair in self.sentinels)

    def transport_options(self) -> dict[str, object]:
        """The broker transport options the sentinel transport needs on top
        of Takt's own (visibility timeout, priorities): the master's name,
        and timeouts, so that a master that hangs or is cut off without
        closing its connections (kombu waits forever by default) is left
        for the new one: a publish or a command gives up after
        BROKER_SOCKET_TIMEOUT_S, and a consumer whose BRPOP got no reply
        reconnects after about 1 + 2 × BROKER_HEALTH_CHECK_S seconds."""
        options: dict[str, object] = {
            "master_name": self.master,
            "socket_timeout": BROKER_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": BROKER_SOCKET_TIMEOUT_S,
            "health_check_interval": BROKER_HEALTH_CHECK_S,
        }
        if self.sentinel_password:
            options["sentinel_kwargs"] = {"password": self.sentinel_password}
        return options

    def describe(self) -> str:
        """For messages: "master 'mymaster' via sentinels h1:26379, h2:26379"."""
        hosts = ", ".join(_address(*pair) for pair in self.sentinels)
        return f"master {self.master!r} via sentinels {hosts}"


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_sentinels(raw: str) -> tuple[tuple[str, int], ...]:
    """REDIS_SENTINELS ("host:port,host:port") as (host, port) pairs; empty
    for an empty value. Raises ImproperlyConfigured naming REDIS_SENTINELS
    for an entry that is not host:port with a port in 1…65535."""
    pairs: list[tuple[str, int]] = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f"REDIS_SENTINELS: expected host:port, got {entry!r}")
        pairs.append((host.strip("[]"), int(port)))
    if len(set(pairs)) != len(pairs):
        raise ImproperlyConfigured(f"REDIS_SENTINELS: a sentinel is listed twice in {raw!r}")
    return tuple(pairs)


def sentinel_config(
    raw_sentinels: str, *, master: str, password: str, sentinel_password: str, db: int
) -> SentinelConfig | None:
    """The Sentinel set-up from the settings' raw values, or None when
    REDIS_SENTINELS is empty (REDIS_URL is used). Raises
    ImproperlyConfigured naming the bad setting."""
    sentinels = parse_sentinels(raw_sentinels)
    if not sentinels:
        return None
    if not _MASTER.fullmatch(master):
        raise ImproperlyConfigured(
            "REDIS_SENTINEL_MASTER: expected the master's name as the sentinels know it"
            f" (letters, digits, '.', '_', '-'), got {master!r}"
        )
    return SentinelConfig(
        sentinels=sentinels,
        master=master,
        password=password,
        sentinel_password=sentinel_password,
        db=db,
    )
