"""How a job definition names another job (F-04 `parent`, F-33 a
dependency trigger's `upstream_job`): by its key when it has one, else by
its id. An int is an id, a string a key, so the two never mix up (a key
may be all digits).

The API resolves a reference against the stored jobs (`stored_job`). A
file of jobs (an import, the jobs declared in code) may also name a job of
the same file, one that the file is about to create: `FileJobs` resolves
those to a `Pending` entry until that entry is saved (jobs.importing,
jobs.declared save the entries a file refers to first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from jobs.core.graph import reference_order
from jobs.models import Job

JobRef = int | str


@dataclass(frozen=True)
class Pending:
    """A reference to entry `position` (0-based) of the same file, whose
    job is not saved yet."""

    position: int
    ref: JobRef


# Takes a reference, returns the job (or a Pending entry); raises
# LookupError with the message for the field.
Resolver = Callable[[JobRef], "Job | Pending"]


def reference_of(job: Job) -> JobRef:
    """How a definition names `job`: its key, else its id."""
    return job.key or job.pk


def stored_job(ref: JobRef) -> Job:
    """The stored job with the key `ref` (a string) or the id `ref` (an
    int). Raises LookupError naming what was not found."""
    if isinstance(ref, str):
        job = Job.objects.filter(key=ref).first()
        if job is None:
            raise LookupError(gettext("no job has the key %(key)r") % {"key": ref})
        return job
    job = Job.objects.filter(pk=ref).first()
    if job is None:
        raise LookupError(gettext("no job has the id %(id)s") % {"id": ref})
    return job


@dataclass
class FileJobs:
    """The jobs of one file (a list of definitions): a reference names an
    entry of the file first, by its key or by the `id` it was exported
    with, else a stored job. Once an entry is saved (`saved`), references
    to it resolve to its job."""

    keys: dict[str, int] = field(default_factory=dict)
    ids: dict[int, list[int]] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    saved: dict[int, Job] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Sequence[Any], labels: Sequence[str]) -> FileJobs:
        """Index `entries` (raw definitions; a malformed one is skipped,
        parsing refuses it). A key given twice is left to `duplicate_keys`."""
        found = cls(labels=list(labels))
        for position, raw in enumerate(entries):
            if not isinstance(raw, dict):
                continue
            key, exported_id = raw.get("key"), raw.get("id")
            if isinstance(key, str) and key:
                found.keys.setdefault(key, position)
            if isinstance(exported_id, int) and not isinstance(exported_id, bool):
                found.ids.setdefault(exported_id, []).append(position)
        return found

    def duplicate_keys(self, entries: Sequence[Any]) -> list[tuple[int, str]]:
        """(position, message) for each entry whose key an earlier entry has."""
        out = []
        for position, raw in enumerate(entries):
            key = raw.get("key") if isinstance(raw, dict) else None
            if isinstance(key, str) and key and self.keys.get(key) != position:
                out.append((position, f"{key!r} is also the key of {self.labels[self.keys[key]]}"))
        return out

    def resolve(self, ref: JobRef) -> Job | Pending:
        position = self._position(ref)
        if position is None:
            return stored_job(ref)
        job = self.saved.get(position)
        return job if job is not None else Pending(position, ref)

    def _position(self, ref: JobRef) -> int | None:
        if isinstance(ref, str):
            return self.keys.get(ref)
        positions = self.ids.get(ref, [])
        if len(positions) > 1:
            raise LookupError(
                f"{len(positions)} jobs of this file have the id {ref}: name the job by its key"
            )
        return positions[0] if positions else None


def pending_references(values: dict[str, Any], triggers: list[dict[str, Any]]) -> dict[str, int]:
    """The references of a parsed definition to entries not saved yet:
    {field path: position}, e.g. {"parent": 0, "triggers[1].upstream_job": 2}."""
    found = {}
    if isinstance(values.get("parent"), Pending):
        found["parent"] = values["parent"].position
    for i, trigger in enumerate(triggers):
        if isinstance(trigger.get("upstream_job"), Pending):
            found[f"triggers[{i}].upstream_job"] = trigger["upstream_job"].position
    return found


def saving_order(
    positions: Sequence[int], refs: Mapping[int, Mapping[str, int]], labels: Sequence[str]
) -> tuple[list[int], tuple[int, str, str] | None]:
    """The entries at `positions` in the order to save them: those an entry
    names (`refs`: position -> {field path: position}) before it, else the
    file's order. Also the refusal of a loop of references, as (position,
    field path, message), or None: such entries cannot be saved one after
    the other."""
    order, loop = reference_order(positions, {p: refs.get(p, {}).values() for p in positions})
    if loop is None:
        return order, None
    first, second = loop[0], loop[1]
    path = next(path for path, to in refs[first].items() if to == second)
    if len(loop) == 2:
        if path == "parent":
            return order, (first, path, gettext("a job cannot be its own parent"))
        return order, (first, path, gettext("a job cannot depend on itself"))
    names = " → ".join(labels[p] for p in loop)
    loop_text = gettext("the jobs of this file name each other in a loop: %(names)s")
    return order, (first, path, loop_text % {"names": names})
