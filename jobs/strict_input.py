"""Input that names a field Takt does not take is refused, never ignored
(issue 27, item 4): `PATCH {"enabld": false}` must not answer 200 and
change nothing. DRF drops unknown keys silently and has no switch for it,
so every serializer that reads a body derives from StrictInput (the
API's, the jobs' and triggers' of jobs.serializers, nested ones included),
and a body-less write is checked with NO_BODY.

The refusal is the API's error format (jobs.api.errors), one entry per
field at fault: `{"enabld": ["unknown field (did you mean 'enabled'?)"]}`
— the hint is the closest writable field name (difflib), given only when
one is close — and `{"runs_done": ["read-only: Takt sets it, leave it
out"]}` for a field the answer shows but a write cannot set. Nested
serializers report by index (`{"triggers": {"1": {"every": ["unknown
field"]}}}`). A serializer whose root has `read_only_input =
"ignore"` (an import of an export, jobs.exchange) takes read-only fields
and drops them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.translation import gettext, gettext_noop
from rest_framework import serializers

UNKNOWN = gettext_noop("unknown field")
UNKNOWN_NEAR = gettext_noop("unknown field (did you mean %(name)r?)")
READ_ONLY = gettext_noop("read-only: Takt sets it, leave it out")
# A form post's CSRF token (the browsable API's forms): not a field.
NOT_FIELDS = frozenset({"csrfmiddlewaretoken"})
# How close a name must be to suggest it (difflib's ratio).
HINT_CUTOFF = 0.75


def field_refusals(
    given: Iterable[Any],
    writable: Iterable[str],
    read_only: Iterable[str] = (),
    *,
    ignore_read_only: bool = False,
) -> dict[str, list[str]]:
    """The refusals for the keys of a body (`given`): {key: [message]} for
    each key that is no writable field, in the order given; empty when all
    are. `read_only` fields are refused as such (or passed over with
    `ignore_read_only`)."""
    writable, read_only = list(writable), set(read_only)
    refusals: dict[str, list[str]] = {}
    for key in given:
        name = str(key)
        if name in writable or name in NOT_FIELDS:
            continue
        if name in read_only:
            if not ignore_read_only:
                refusals[name] = [gettext(READ_ONLY)]
            continue
        near = difflib.get_close_matches(name, writable, n=1, cutoff=HINT_CUTOFF)
        refusals[name] = [gettext(UNKNOWN_NEAR) % {"name": near[0]} if near else gettext(UNKNOWN)]
    return refusals


class StrictInput(serializers.Serializer):
    """A serializer that refuses a body naming a field it does not write
    (module docstring), before any value is converted."""

    read_only_input = "refuse"  # or "ignore": read-only fields are dropped
    # Fields the answer shows that this serializer does not have (an input
    # serializer apart from the output's): refused as read-only, not unknown.
    shown_read_only: tuple[str, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = self.fields
            refusals = field_refusals(
                data.keys(),
                [name for name, field in fields.items() if not field.read_only],
                [
                    *(name for name, field in fields.items() if field.read_only),
                    *self.shown_read_only,
                ],
                ignore_read_only=getattr(self.root, "read_only_input", "refuse") == "ignore",
            )
            if refusals:
                raise serializers.ValidationError(refusals)
        return super().to_internal_value(data)


class NoBody(StrictInput):
    """The body of a write that takes none: any field in it is refused
    (e.g. `POST /api/v1/jobs/<id>/resume`)."""


def refuse_any_body(data: Any) -> None:
    """Raise the refusal (a DRF ValidationError) for a body-less write's
    `data` that names a field."""
    NoBody(data=data).is_valid(raise_exception=True)
