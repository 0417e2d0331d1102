"""Real-browser tests of the admin: Playwright drives Debian's Chromium
(/usr/bin/chromium, never a browser Playwright downloads) against
`manage.py runserver` in UTC, from a browser in America/New_York.

* The web server, worker and beat are the live processes of
  tests/live_fixtures.py with `server_env` below: the web server once per
  session (per xdist worker; it holds no state between requests that a
  test could leave behind), a worker once per module and a beat per test
  that asks for one.
* `browser` (per session) launches Chromium; each test gets a fresh
  context of it (cookies, storage). A missing or broken Chromium fails
  every test with what to install, it never skips.
* `page` (per test) is a fresh context (New York, en-US, 1280x900) logged
  in through the login page as `operator`; an uncaught JavaScript error or
  a failed request on it fails the test. A failed test's last screen is
  saved and named in the report.
* `shot(page, name)` saves a screenshot of the window, or of one element
  (`element=`), or of the whole page (`full_page=True`): in
  docs/images/admin/ with TAKT_SCREENSHOTS=1, else in the test's tmp dir.
* `themed_page(color_scheme)` is `page` in a light or dark browser.
* Before each test the database is emptied, its ids restarted, and
  Takt's keys in Redis deleted (locks, cancel markers, queue switches), so
  that nothing of one test reaches the next one's worker.

Playwright's sync API keeps an asyncio loop running in this thread, and
Django's ORM refuses to run where a loop runs unless
DJANGO_ALLOW_ASYNC_UNSAFE is set: `browser` sets it while the session's
browser is up (tests call the ORM only between browser steps, never
concurrently with them; the live processes never get the variable).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from playwright.sync_api import Browser, Error, Locator, Page, expect, sync_playwright
except ImportError as exc:  # loud, at collection: never a silent skip
    raise ImportError(
        "The browser tests need Playwright: `make test` installs it, or run"
        " `.venv/bin/pip install -e '.[dev]'` (never `playwright install`:"
        " the tests drive Debian's chromium)"
    ) from exc

from tests.browser.pages import BROWSER_TIME_ZONE, Shot, log_in
from tests.live_fixtures import (  # noqa: F401  (fixtures)
    _stop_what_the_test_started,
    beat,
    emptied_retried,
    live_env,
    live_log_dir,
    serve_web,
    start_process,
    worker,
)
from tests.processes import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # the tests may run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = (
    "`make test` installs it (as root or with passwordless sudo), or run:"
    " sudo apt-get install -y chromium"
)
VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 10_000  # any one browser step: a click, a page load, an expect
SCREENSHOT_DIR = ROOT / "docs" / "images" / "admin"
OPERATOR = ("admin", "browser-test-pw")

expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def server_env() -> dict[str, str]:
    """The web server, workers and beats run in UTC, five hours from the
    browser (four in summer), with DEBUG on so runserver serves the static
    files."""
    return {"TAKT_TIME_ZONE": "UTC", "DJANGO_DEBUG": "true"}


def headed() -> bool:
    """TAKT_BROWSER_HEADED=1 shows the browser window (needs a display)."""
    return os.environ.get("TAKT_BROWSER_HEADED", "") == "1"


@pytest.fixture(scope="session")
def web(live_env: dict[str, str], live_log_dir: Path) -> Iterator[str]:  # noqa: F811
    """The web server of the session's browser tests (`serve_web` with
    `live_env`); a module that needs other settings overrides it."""
    with serve_web(live_env, live_log_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless (a fresh profile per launch: Playwright
    makes a temporary user-data dir and removes it on close)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium is not installed ({CHROMIUM} is missing): {INSTALL_HINT}", pytrace=False
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            try:
                launched = playwright.chromium.launch(
                    executable_path=str(CHROMIUM),
                    headless=not headed(),
                    args=CHROMIUM_ARGS + ([] if headed() else ["--headless"]),
                    slow_mo=int(os.environ.get("TAKT_BROWSER_SLOW_MO_MS", "0")),
                    timeout=30_000,
                )
            except Error as exc:
                hint = "headed needs a display: try xvfb-run -a" if headed() else INSTALL_HINT
                pytest.fail(f"Chromium ({CHROMIUM}) did not start: {exc}\n{hint}", pytrace=False)
            yield launched
            launched.close()


@pytest.fixture(autouse=True)
def _content_types_keep_their_ids(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """Before each test, empty the database with its ids restarted, so that
    post_migrate makes the content types again with the same ids each time.
    The module's web server caches those ids for the admin's change log,
    and the flush that ends each transactional test gives them new ones:
    "Add job" in a later test would fail its foreign key. Takt's keys in
    Redis for the restarted ids are gone too (tests/conftest.py,
    `_redis_as_new`)."""
    from django.core.management import call_command

    with django_db_blocker.unblock():
        emptied_retried(
            lambda: call_command("flush", interactive=False, reset_sequences=True, verbosity=0)
        )
    yield


@pytest.fixture
def operations_job(transactional_db: None) -> Any:
    """The built-in job "Takt operations" that the migrations make and each
    test's flush removes: the admin's long operations run as its runs."""
    import importlib

    from django.apps import apps

    from runs.operations import operations_job as builtin

    migration = importlib.import_module("jobs.migrations.0010_builtin_operations_job")
    migration.create_operations_job(apps, None)
    return builtin()


@pytest.fixture
def operator(transactional_db: None) -> tuple[str, str]:
    """A superuser's (username, password). The tests' rows are committed
    (the web server must see them) and emptied after each test, so the user
    is made anew for each."""
    from django.contrib.auth.models import User

    User.objects.create(
        username=OPERATOR[0], password=password_hash(), is_staff=True, is_superuser=True
    )
    return OPERATOR


@functools.cache
def password_hash() -> str:
    """The operator's password hashed once per session (the web server
    checks it at each login)."""
    from django.contrib.auth.hashers import make_password

    return make_password(OPERATOR[1])


# Answers that are a page's normal business: the schedule preview answers 400
# with the field errors while an operator types a wrong expression.
EXPECTED_REFUSALS = {("/api/v1/schedule/preview", 400)}


def expected_refusal(url: str, status: int) -> bool:
    path = url.split("://", 1)[-1].partition("/")[2].partition("?")[0]
    return url.endswith("/favicon.ico") or (f"/{path}", status) in EXPECTED_REFUSALS


def open_page(browser: Browser, web: str, **options: Any) -> tuple[Page, list[str]]:  # noqa: F811
    """A new page in a fresh browser context (New York, en-US, 1280x900, and
    `options`) whose relative URLs go to the web server, and the list of
    problems it sees: uncaught JavaScript errors and failed requests."""
    options = {"timezone_id": BROWSER_TIME_ZONE, "locale": "en-US", **options}
    context = browser.new_context(base_url=web, viewport=VIEWPORT, **options)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"JavaScript error: {exc}"))
    page.on(
        "response",
        lambda r: (
            problems.append(f"HTTP {r.status} for {r.url}")
            if r.status >= 400 and not expected_refusal(r.url, r.status)
            else None
        ),
    )
    return page, problems


# The pages a test opened, and its tmp dir: for the screenshot of a failed
# test's last screen.
PAGES = pytest.StashKey[list[Page]]()
TMP_DIR = pytest.StashKey[Path]()


def remember(request: pytest.FixtureRequest, page: Page) -> None:
    request.node.stash.setdefault(PAGES, []).append(page)
    request.node.stash[TMP_DIR] = request.getfixturevalue("tmp_path")


@pytest.fixture
def anonymous_page(
    request: pytest.FixtureRequest,
    browser: Browser,
    web: str,  # noqa: F811
) -> Iterator[Page]:
    """A new page in a fresh browser context, not logged in, whose relative
    URLs go to the web server: `page.goto("/admin/")`."""
    page, problems = open_page(browser, web)
    remember(request, page)
    yield page
    page.context.close()
    assert not problems, "the browser saw: " + "; ".join(problems)


@pytest.fixture
def page(anonymous_page: Page, operator: tuple[str, str]) -> Page:
    """A page logged in as `operator` through the login page."""
    log_in(anonymous_page, *operator)
    return anonymous_page


@pytest.fixture
def themed_page(
    request: pytest.FixtureRequest,
    browser: Browser,
    web: str,  # noqa: F811
    operator: tuple[str, str],
) -> Iterator[Callable[[str], Page]]:
    """themed_page("dark") or themed_page("light"): a page logged in as
    `operator` in a browser whose system colour scheme is that one (the
    admin's theme is "auto" until the operator picks one)."""
    opened: list[tuple[Page, list[str]]] = []

    def open_themed(color_scheme: str) -> Page:
        page, problems = open_page(browser, web, color_scheme=color_scheme)
        opened.append((page, problems))
        remember(request, page)
        log_in(page, *operator)
        return page

    yield open_themed
    seen = [problem for page, problems in opened for problem in problems]
    for page, _ in opened:
        page.context.close()
    assert not seen, "the browser saw: " + "; ".join(seen)


@pytest.fixture
def german_page(
    request: pytest.FixtureRequest,
    browser: Browser,
    web: str,  # noqa: F811
    operator: tuple[str, str],
) -> Iterator[Page]:
    """A page in a German browser (de-DE, New York), logged in as `operator`
    through the German login page."""
    page, problems = open_page(browser, web, locale="de-DE")
    remember(request, page)
    page.goto("/admin/login/")
    page.get_by_label("Benutzername").fill(operator[0])
    page.get_by_label("Passwort").fill(operator[1])
    page.get_by_role("button", name="Anmelden").click()
    expect(page.get_by_role("button", name="Abmelden")).to_be_visible()
    yield page
    page.context.close()
    assert not problems, "the browser saw: " + "; ".join(problems)


# An element's box in page coordinates (Playwright's bounding_box is the window's).
PAGE_BOX = """e => { const r = e.getBoundingClientRect();
  return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height}; }"""


@pytest.fixture
def shot(tmp_path: Path) -> Shot:
    """shot(page, name, element=None, full_page=False, between=None): a PNG
    of the window scrolled to the top, of `element` alone, of the page from
    the top of `between[0]` to the bottom of `between[1]`, or of the whole
    page, as
    docs/images/admin/<name>.png with TAKT_SCREENSHOTS=1, else in the
    test's tmp dir; returns its path. A window or an element reads better
    in a document than a page 4,000 pixels long."""
    folder = SCREENSHOT_DIR if os.environ.get("TAKT_SCREENSHOTS") == "1" else tmp_path

    def take(
        page: Page,
        name: str,
        *,
        element: Locator | None = None,
        full_page: bool = False,
        between: tuple[Locator, Locator] | None = None,
    ) -> Path:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            raise ValueError(f"screenshot name {name!r}: use lowercase letters, digits and -")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        page.mouse.move(0, 0)  # no hover effect or tooltip in the picture
        if element is not None:
            element.screenshot(path=path, animations="disabled", caret="hide")
            return path
        if between is not None:  # from the top of one element to the bottom of another
            first, last = (part.evaluate(PAGE_BOX) for part in between)
            top, bottom = first["y"], last["y"] + last["height"]
            left = min(first["x"], last["x"])
            right = max(first["x"] + first["width"], last["x"] + last["width"])
            clip = {"x": left, "y": top, "width": right - left, "height": bottom - top}
            page.screenshot(
                path=path, full_page=True, clip=clip, animations="disabled", caret="hide"
            )
            return path
        page.evaluate("window.scrollTo(0, 0)")  # the admin's sticky sidebar stays on top
        page.screenshot(path=path, full_page=full_page, animations="disabled", caret="hide")
        return path

    return take


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed browser test's report names a screenshot of its last screen."""
    report = yield
    pages = item.stash.get(PAGES, [])
    if report.when == "call" and report.failed and pages:
        path = item.stash[TMP_DIR] / "failure.png"
        try:
            pages[-1].screenshot(path=path, full_page=True)
            report.sections.append(("browser", f"last screen: {path}\nat {pages[-1].url}"))
        except Error as exc:
            report.sections.append(("browser", f"no screenshot: {exc}"))
    return report
