"""Errors as JSON naming the field (spec section 11).

A refused request gets `{"<field>": ["message", …]}` (nested for triggers, by
index: `{"triggers": {"1": {"cron_expression": ["…"]}}}`), or `{"detail": "…"}`
when no field is at fault. Takt's own exceptions map to statuses here, so
that views only raise: InvalidInput → 400 on its field, JobNotFound → 404,
QueuePaused, MaintenanceMode and ConditionNotMet → 409, ChildJob → 400 on
`job`, a Django ValidationError → 400, a body past
DATA_UPLOAD_MAX_MEMORY_SIZE (RequestDataTooBig) → 400 naming the limit.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from jobs.definitions import django_errors
from jobs.errors import (
    ChildJob,
    ConditionNotMet,
    InvalidInput,
    JobNotFound,
    MaintenanceMode,
    QueuePaused,
)


def body_too_large() -> str:
    """The refusal of a request body past DATA_UPLOAD_MAX_MEMORY_SIZE."""
    return gettext(
        "the request body is too large: at most %(limit)s bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)"
    ) % {"limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": body_too_large()}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, InvalidInput):
        return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, JobNotFound):
        return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, QueuePaused):
        return Response({"queue": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, MaintenanceMode):
        return Response({"maintenance": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ConditionNotMet):
        return Response({"condition": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ChildJob):
        message = str(exc).removeprefix("job: ")  # the field is the key already
        return Response({"job": [message]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        return Response(django_errors(exc), status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)
