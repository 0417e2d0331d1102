"""A web request during a database outage gets a clear 503, not a
traceback: an HTML page for the admin, `{"detail": …}` for the API (paths
under /api/), both with a Retry-After header. The outage is logged once
(runs.outage), and the broken connection dropped so the next request
connects again."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from runs.outage import OUTAGE, drop_connection, is_db_unreachable

RETRY_AFTER_S = 10
MESSAGE = (
    "The database is not reachable at the moment. Scheduled runs are not lost:"
    " the scheduler and the workers wait for it and go on by themselves."
    " Try again in a few seconds."
)
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Database unavailable · Takt</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Database unavailable</h1>
<p>{message}</p>
</body></html>
"""


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if OUTAGE.down and response.status_code < 500 and connection.connection is not None:
            OUTAGE.recovered()  # this request used a working connection
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_db_unreachable(exception):
            return None  # Django's own handling (a 500): a bad statement is no outage
        OUTAGE.failed(exception, what=f"web {request.method} {request.path}")
        drop_connection()
        return unavailable(request)


def unavailable(request: HttpRequest) -> HttpResponse:
    """The 503 for `request`: JSON under /api/, else a short page."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        response = HttpResponse(PAGE.format(message=MESSAGE), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response
