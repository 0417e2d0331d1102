"""Names unique whatever their case, refused on the `name` field (groups
and result variables, F-31 and F-32): "Imports" and "imports " are one
name. A case-insensitive unique constraint in the database backs this up;
its error would name no field, so validation says it first."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError


class UniqueNameWhateverCase:
    """A mixin for a model with a `name` and a UniqueConstraint on
    Lower("name"): `clean()` strips the name and refuses a taken one on
    `name`, with the constraint's own message."""

    name: str
    pk: Any
    objects: Any

    def clean(self) -> None:
        self.name = (self.name or "").strip()
        same = type(self).objects.filter(name__iexact=self.name).exclude(pk=self.pk)
        if self.name and same.exists():
            constraint = self._meta.constraints[0]  # type: ignore[attr-defined]
            raise ValidationError({"name": constraint.violation_error_message})

    def validate_constraints(self, exclude: Any = None) -> None:
        # clean() refused a taken name on its field: do not refuse it twice.
        super().validate_constraints(exclude={*(exclude or ()), "name"})  # type: ignore[misc]
