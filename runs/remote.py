"""The built-in job callable `takt.remote_run` (F-42): start a job of
another Takt installation through its API with a token scoped to that job,
and (by default) wait for its outcome, so a run here stands for a run there.

Params of a job with target `takt.remote_run`:

    url        the other installation's base URL, e.g. "https://takt-b.example.com"
               (https only, unless TAKT_REMOTE_ALLOW_HTTP is on)
    job        the job's id there
    token_env  the environment variable holding the token (default
               TAKT_REMOTE_TOKEN; its name must start with TAKT_REMOTE_):
               tokens stay out of the database
    params     passed on as the remote run's params (optional)
    wait       wait for the remote run to finish (default true); the run
               here fails when the remote one does not succeed, and the
               job's timeout bounds the wait
    poll_s     seconds between status checks while waiting (default 5)

The request carries `Idempotency-Key: takt-<this run's id>`, so a request
repeated after a lost answer starts nothing twice.

Least privilege (docs/security.md): `url`, `job`, `token_env`, `wait` and
`poll_s` come from the job only (a caller's run params may not name them:
`job_only_params`), so whoever may start the job cannot send its token
elsewhere; only variables named TAKT_REMOTE_* can be sent; a redirect is
not followed (the token would go with it), it fails the run.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings

from jobs.registry import takt_job
from runs.context import JobFailed

FINISHED = {"succeeded", "failed", "timed_out", "skipped", "cancelled", "lost"}
TOKEN_PREFIX = "TAKT_REMOTE_"
JOB_ONLY = ("url", "job", "token_env", "wait", "poll_s")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx answer is an error: following it would carry the token to
    wherever the answer points."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        raise urllib.error.HTTPError(
            req.full_url, code, f"redirect to {newurl} not followed", headers, fp
        )


_OPENER = urllib.request.build_opener(_NoRedirects)


class RemoteError(Exception):
    pass


def _call(method: str, url: str, token: str, body: Any = None, key: str = "") -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Idempotency-Key", key)
    try:
        with _OPENER.open(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            where = exc.headers.get("Location", "?") if exc.headers else "?"
            raise RemoteError(
                f"{method} {url}: HTTP {exc.code}: the redirect to {where} is not followed"
                " (it would carry the token along)"
            ) from None
        text = exc.read().decode(errors="replace")[:500]
        raise RemoteError(f"{method} {url}: HTTP {exc.code}: {text}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise RemoteError(f"{method} {url}: {exc}") from None


def _settings(params: dict[str, Any]) -> tuple[str, int, str]:
    url = params.get("url")
    schemes = ("https://", "http://") if settings.TAKT_REMOTE_ALLOW_HTTP else ("https://",)
    if not isinstance(url, str) or not url.startswith(schemes):
        raise RemoteError(
            "params.url: the other installation's https:// base URL is required"
            + ("" if settings.TAKT_REMOTE_ALLOW_HTTP else " (http:// needs TAKT_REMOTE_ALLOW_HTTP)")
        )
    job = params.get("job")
    if not isinstance(job, int) or isinstance(job, bool) or job < 1:
        raise RemoteError("params.job: the id of the job there (a whole number) is required")
    variable = params.get("token_env", "TAKT_REMOTE_TOKEN")
    if not isinstance(variable, str) or not variable.startswith(TOKEN_PREFIX):
        raise RemoteError(
            f"params.token_env: must name a variable starting with {TOKEN_PREFIX}, got {variable!r}"
        )
    token = os.environ.get(variable, "")
    if not token:
        raise RemoteError(f"params.token_env: the environment variable {variable} is not set")
    return url.rstrip("/"), job, token


@takt_job("takt.remote_run", job_only_params=JOB_ONLY)
def remote_run(job: Any) -> dict[str, Any]:
    params = job.params
    try:
        base, remote_job, token = _settings(params)
        body = {"params": params.get("params") or {}}
        _status, run = _call(
            "POST", f"{base}/api/v1/jobs/{remote_job}/run", token, body, key=f"takt-{job.run_id}"
        )
        job.log(f"remote run #{run['id']} of job #{remote_job} at {base}: {run['status']}")
        if not params.get("wait", True):
            return {"remote_run": run["id"], "status": run["status"]}
        poll_s = float(params.get("poll_s", 5))
        while run["status"] not in FINISHED:
            time.sleep(poll_s)
            _status, run = _call("GET", f"{base}/api/v1/runs/{run['id']}", token)
    except RemoteError as exc:
        raise JobFailed(str(exc)) from None  # what job.fail() raises
    job.log(f"remote run #{run['id']} ended {run['status']}: {run.get('message', '')}".rstrip(": "))
    if run["status"] != "succeeded":
        job.fail(f"remote run #{run['id']} ended {run['status']}")
    return {"remote_run": run["id"], "status": run["status"], "result": run.get("result")}
