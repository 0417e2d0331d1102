"""The local hours of a time zone over a stretch of time, for the load
forecast (`jobs.core.forecast`). Part of the pure core: stdlib and zoneinfo.

A stretch of UTC time is cut into *pieces*, each with one local date, hour
and UTC offset. A day with a spring-forward change has an hour with no
piece (or a shorter one), and the change is recorded as a *gap*: the wall
times it skips and the instant after it, where a fixed-time cron fires
them (F-11). A fall-back day has two pieces for the repeated hour, the
second marked as not the `first` occurrence of its wall times. Offsets and
transitions are taken to be whole seconds, as every tz database zone has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

US = timedelta(microseconds=1)
SECOND_US = 1_000_000
HOUR_US = 3600 * SECOND_US
DAY_US = 24 * HOUR_US
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    """Aware `moment` as microseconds since the Unix epoch."""
    return (moment - EPOCH) // US


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def _local(us: int, zone: tzinfo) -> datetime:
    return from_us(us).astimezone(zone)


def _change_us(zone: tzinfo, low: int, high: int) -> int:
    """The first instant in (low, high] (whole seconds) whose UTC offset
    differs from low's; the offset at high differs."""
    before = _local(low, zone).utcoffset()
    low_s, high_s = low // SECOND_US, -(-high // SECOND_US)
    while high_s - low_s > 1:
        middle = (low_s + high_s) // 2
        if _local(middle * SECOND_US, zone).utcoffset() == before:
            low_s = middle
        else:
            high_s = middle
    return max(high_s * SECOND_US, low + 1)


@dataclass(frozen=True)
class Piece:
    """UTC [start_us, end_us) with one local date, hour and UTC offset.
    `wall_us`: microseconds into the local hour at start_us. `first`: its
    wall times occur here for the first time (False in the second copy of a
    repeated hour). `cell`: the display cell, once intersected."""

    start_us: int
    end_us: int
    day: date
    hour: int
    wall_us: int
    first: bool
    cell: int = -1


@dataclass(frozen=True)
class Gap:
    """Wall times skipped by a spring-forward change, as (day, hour, from,
    to) microseconds into the hour; they fire at `at_us` (F-11)."""

    at_us: int
    parts: tuple[tuple[date, int, int, int], ...]


def _gap(zone: tzinfo, at_us: int) -> Gap | None:
    """The wall times skipped by the change of offset at `at_us`, if any."""
    before = _local(at_us - 1, zone).replace(tzinfo=None) + US
    after = _local(at_us, zone).replace(tzinfo=None)
    parts = []
    while before < after:
        hour_start = before.replace(minute=0, second=0, microsecond=0)
        upto = min(after, hour_start + timedelta(hours=1))
        wall = (before - hour_start) // US
        parts.append((before.date(), before.hour, wall, wall + (upto - before) // US))
        before = upto
    return Gap(at_us, tuple(parts)) if parts else None


def walk(zone: tzinfo, start_us: int, end_us: int) -> tuple[list[Piece], list[Gap]]:
    """The pieces partitioning [start_us, end_us), and the gaps in it."""
    pieces: list[Piece] = []
    gaps: list[Gap] = []
    covered: dict[tuple[date, int], int] = {}  # label -> wall_us reached so far
    at, previous = start_us, _local(start_us, zone).utcoffset()
    while at < end_us:
        local = _local(at, zone)
        offset = local.utcoffset()
        if offset != previous and (found := _gap(zone, at)) is not None:
            gaps.append(found)
        previous = offset
        wall = ((local.minute * 60 + local.second) * SECOND_US) + local.microsecond
        upto = min(at + HOUR_US - wall, end_us)
        if _local(upto - 1, zone).utcoffset() != offset:
            upto = _change_us(zone, at, upto - 1)
        label = (local.date(), local.hour)
        seen = covered.get(label, 0)
        wall_end = wall + upto - at
        covered[label] = max(seen, wall_end)
        if wall < seen:  # a repeated stretch: the part up to `seen` came before
            split = at + min(seen, wall_end) - wall
            pieces.append(Piece(at, split, *label, wall, False))
            if split < upto:
                pieces.append(Piece(split, upto, *label, wall + split - at, True))
        else:
            pieces.append(Piece(at, upto, *label, wall, True))
        at = upto
    return pieces, gaps


def intersect(pieces: list[Piece], cells: list[Piece]) -> list[Piece]:
    """The parts of `pieces` inside the display `cells` (both ascending and
    disjoint), each tagged with its cell."""
    atoms: list[Piece] = []
    i = j = 0
    while i < len(pieces) and j < len(cells):
        piece, cell = pieces[i], cells[j]
        low, high = max(piece.start_us, cell.start_us), min(piece.end_us, cell.end_us)
        if low < high:
            wall = piece.wall_us + low - piece.start_us
            atoms.append(Piece(low, high, piece.day, piece.hour, wall, piece.first, cell.cell))
        if piece.end_us <= cell.end_us:
            i += 1
        else:
            j += 1
    return atoms


def clip(pieces: list[Piece], start_us: int, end_us: int) -> list[Piece]:
    """`pieces` cut to [start_us, end_us)."""
    clipped = []
    for piece in pieces:
        low, high = max(piece.start_us, start_us), min(piece.end_us, end_us)
        if low < high:
            wall = piece.wall_us + low - piece.start_us
            clipped.append(Piece(low, high, piece.day, piece.hour, wall, piece.first, piece.cell))
    return clipped


def display_cells(zone: tzinfo, now: datetime, days: int) -> tuple[list[Piece], int, int]:
    """The display zone's pieces from the local midnight of now's date for
    `days` local dates, tagged with their cell (day index * 24 + hour); and
    the first and last instant (UTC µs) they cover."""
    first_day = now.astimezone(zone).date()
    # Two days' margin either side: midnight can lie in a gap or repeat.
    around = to_us(datetime.combine(first_day, time(), tzinfo=UTC))
    pieces, _ = walk(zone, around - 2 * DAY_US, around + (days + 2) * DAY_US)
    cells = [
        Piece(p.start_us, p.end_us, p.day, p.hour, p.wall_us, p.first, index * 24 + p.hour)
        for p in pieces
        if 0 <= (index := (p.day - first_day).days) < days
    ]
    return cells, cells[0].start_us, cells[-1].end_us
