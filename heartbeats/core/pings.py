"""Who may ping which heartbeat, and how often a ping may notify (issue 25):
the pure core. Stdlib only, no clock reads: time-dependent functions take
`now` (aware UTC).

- Takt's own processes (`worker:<name>`, `beat@<host>`) report themselves
  and accept no pings: a ping would make a dead worker look alive.
- A ping token is TAKT_PING_TOKEN (every outside heartbeat) or the
  heartbeat's own (only that one; only its SHA-256 is stored). With one of
  them configured a ping must present a match; with none, a ping passes
  only with DEBUG on (`make run`), and is refused otherwise.
- Tokens are compared in constant time (hmac.compare_digest), as digests,
  so neither a token's length nor its text shows in the answer's timing.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta

# The names Takt's processes report under (heartbeats.processes).
PROCESS_PREFIXES = ("worker:", "beat@")


def is_process_name(name: str) -> bool:
    """Whether `name` is the heartbeat of a Takt worker or beat."""
    return name.startswith(PROCESS_PREFIXES)


def token_digest(token: str) -> str:
    """The SHA-256 (hex) a heartbeat's own ping token is stored as."""
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_token(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def token_matches(presented: str | None, expected: str) -> bool:
    """Whether the bearer token `presented` is `expected` (a configured,
    non-empty token such as TAKT_METRICS_TOKEN), in constant time."""
    if presented is None:
        return False
    return hmac.compare_digest(token_digest(presented), token_digest(expected))


def compute_ping_allowed(
    presented: str | None, *, global_token: str, own_digest: str, debug: bool
) -> bool:
    """Whether a ping presenting `presented` (None: no token) may write.

    `global_token` is TAKT_PING_TOKEN ("" unset), `own_digest` the
    heartbeat's stored digest ("" none, or no such heartbeat). With neither
    configured, only DEBUG lets a ping through. Every configured token is
    compared, so the time taken does not tell which one matched."""
    digests = [token_digest(token) for token in (global_token,) if token]
    if own_digest:
        digests.append(own_digest)
    if not digests:
        return debug
    if presented is None:
        return False
    offered = token_digest(presented)
    matches = [hmac.compare_digest(offered, digest) for digest in digests]
    return any(matches)


def compute_notification_due(
    last_notified_at: datetime | None, *, now: datetime, interval: timedelta
) -> bool:
    """Whether a ping at `now` may send a notification about its heartbeat,
    whose last ping notification went out at `last_notified_at` (None:
    never): at most one per `interval`. Exactly `interval` later is due."""
    return last_notified_at is None or now - last_notified_at >= interval
