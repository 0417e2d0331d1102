"""Maintenance by lock file across a cluster (F-29; issue 27, defect 2).

TAKT_MAINTENANCE_LOCK_FILE names one or more files (comma-separated; the
ERP manual has a normal and an admin-only lock file, in several paths).
A file exists on some machine, not in the cluster: with two beats on two
hosts and the file on one, each beat deciding from its own disk turned
maintenance off and on every 30 s. The rule now:

* every beat looks for the configured files on its own host at each tick
  and reports the ones it sees to Redis under its own key
  ``<prefix>:maint:files:<beat id>`` (host and paths), with a TTL of
  ``seen_ttl_s()`` (5 polls, at least 3 s) that its next ticks renew; it
  deletes the key when it sees none any more;
* maintenance by file is on while any live beat reports a file (or the
  file exists where the asking process runs): a beat that stops reporting
  (killed, or its host gone) drops out when its key expires;
* the alert and the Queue page name each file and the host that sees it;
* removing a file is a request any process can make
  (`request_removal`, used by takt.maintenance_off and
  takt.remove_lock_file, which run on a worker that may be on another
  host): each beat deletes the requested files it sees at its next tick.
  The request lives ``seen_ttl_s()`` seconds: a file created again within
  that time is removed too.

Redis's own expiry times the reports: no clock of two machines is compared.
Nothing of this costs anything while TAKT_MAINTENANCE_LOCK_FILE is empty.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass

from django.conf import settings

from runs.locks import get_redis

log = logging.getLogger("takt.queue")

ALL = "*"


@dataclass(frozen=True)
class Seen:
    """A lock file that exists, and the host (and beat) that sees it."""

    path: str
    host: str

    def __str__(self) -> str:
        return f"{self.path} on {self.host}"


def configured() -> tuple[str, ...]:
    """The lock files TAKT_MAINTENANCE_LOCK_FILE names, in its order."""
    raw = getattr(settings, "TAKT_MAINTENANCE_LOCK_FILE", "") or ""
    paths = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    return tuple(dict.fromkeys(p.strip() for p in paths if p and p.strip()))


def present_here() -> tuple[str, ...]:
    """The configured lock files that exist on this host."""
    return tuple(path for path in configured() if os.path.exists(path))


def seen_ttl_s() -> float:
    return max(3.0, 5 * float(settings.TAKT_POLL_SECONDS))


def _prefix() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:maint:files"


def _removal_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:maint:remove"


def beat_id() -> str:
    """This beat's key in the reports: its host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Reporter:
    """One beat's side of the exchange, kept across its ticks."""

    def __init__(self, ident: str | None = None, host: str | None = None) -> None:
        self.ident = ident or beat_id()
        self.host = host or socket.gethostname()
        self._reported = False

    def exchange(self, seen_here: tuple[str, ...] | None = None) -> list[Seen]:
        """At a tick: act on a removal request, report the files seen here
        (`seen_here`: None looks on this host), and return every file a
        live beat reports. Two Redis round trips; none when no lock file is
        configured. Raises redis.RedisError."""
        if not configured():
            return []
        redis = get_redis()
        removal = redis.get(_removal_key())
        if removal is not None:
            self._remove(json.loads(removal))
        seen = present_here() if seen_here is None else seen_here
        key = f"{_prefix()}:{self.ident}"
        pipe = redis.pipeline(transaction=False)
        if seen:
            value = json.dumps({"host": self.host, "files": list(seen)})
            pipe.set(key, value, px=int(seen_ttl_s() * 1000))
            pipe.sadd(_prefix(), self.ident)
        elif self._reported:
            pipe.delete(key)
        pipe.smembers(_prefix())
        members = pipe.execute()[-1]
        self._reported = bool(seen)
        return _reports(redis, members)

    def _remove(self, paths: list[str]) -> None:
        for path in configured():
            if (ALL in paths or path in paths) and os.path.exists(path):
                try:
                    os.remove(path)
                    log.info("removed the maintenance lock file %s (asked for)", path)
                except OSError as exc:
                    log.warning("could not remove the maintenance lock file %s: %s", path, exc)


def _reports(redis: object, members: set[bytes]) -> list[Seen]:
    """The files the beats in `members` report, dropping those whose report
    expired."""
    if not members:
        return []
    idents = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    values = redis.mget([f"{_prefix()}:{i}" for i in idents])  # type: ignore[attr-defined]
    gone = [i for i, v in zip(idents, values, strict=True) if v is None]
    if gone:
        redis.srem(_prefix(), *gone)  # type: ignore[attr-defined]
    found: dict[tuple[str, str], Seen] = {}
    for value in values:
        if value is not None:
            report = json.loads(value)
            for path in report["files"]:
                found[(path, report["host"])] = Seen(path, report["host"])
    return sorted(found.values(), key=lambda s: (s.path, s.host))


def seen_in_cluster() -> list[Seen]:
    """Every configured lock file that exists here or that a live beat
    reports (for a web process, a worker, a command). Nothing is asked of
    Redis while no lock file is configured; a Redis error leaves what this
    host sees."""
    if not configured():
        return []
    here = [Seen(path, socket.gethostname()) for path in present_here()]
    try:
        redis = get_redis()
        reported = _reports(redis, redis.smembers(_prefix()))
    except Exception as exc:  # the local answer still holds
        log.warning("could not read the lock files the beats see: %s", exc)
        reported = []
    return sorted(
        {(s.path, s.host): s for s in here + reported}.values(), key=lambda s: (s.path, s.host)
    )


def describe(seen: list[Seen]) -> str:
    """'/srv/NoLock.ini on host-a, /srv/Admin.ini on host-b'."""
    return ", ".join(str(s) for s in seen)


def request_removal(paths: list[str] | None = None) -> None:
    """Ask every beat to delete the named lock files (None: all of them)
    where it sees them, at its next tick."""
    value = json.dumps(paths if paths else [ALL])
    get_redis().set(_removal_key(), value, px=int(seen_ttl_s() * 1000))
