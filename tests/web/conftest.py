"""Browser tests of the learner's page: Debian's chromium driven by pytest-playwright, against a
real ``judge serve`` (tests/conftest.py's ``Service``) on a free port, with two learners' keys.

Every test's page is watched: a console error, an uncaught exception, or a request that leaves
the server's origin fails the test. A failing test's screenshot is kept under
``test-artifacts/web/`` (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _service_class():
    """tests/conftest.py's ``Service`` (a plain import cannot name it under --import-mode=importlib)."""
    import importlib.util
    import sys

    for mod in list(sys.modules.values()):
        if getattr(mod, "__file__", None) == str(ROOT / "tests" / "conftest.py") and hasattr(mod, "Service"):
            return mod.Service
    spec = importlib.util.spec_from_file_location("judge_tests_conftest", ROOT / "tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Service


ARTIFACTS = ROOT / "test-artifacts" / "web"
CHROMIUM = os.environ.get("JUDGE_CHROMIUM", "/usr/bin/chromium")
KEYS = ("web-key-alice", "web-key-bob", "web-key-carol")
BUNDLE = ROOT / "judge" / "service" / "static" / "dist" / "page.js"


def _missing() -> list[str]:
    return [what for what, ok in (("chromium at " + CHROMIUM, shutil.which(CHROMIUM) is not None),
                                  (f"the page's bundle ({BUNDLE}; run scripts/build-web.sh)", BUNDLE.is_file()))
            if not ok]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # playwright makes a fresh temporary profile (user-data dir) for every launch
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run"]}


@pytest.fixture(scope="session")
def web(tmp_path_factory):
    """One real service for the browser tests: 2 workers, glm5_mis, three learners' keys. Its
    fallback poll of the events table is an hour apart: every verdict, test result and plot a
    page shows reached it through the workers' notification (a lost one hangs its test)."""
    missing = _missing()
    if missing:  # make setup installs both: their absence is a broken set-up, not a reason to skip
        pytest.fail("the browser tests need " + " and ".join(missing) + " (make setup)")
    svc = _service_class()(tmp_path_factory.mktemp("web"), workers=2, JUDGE_API_KEYS=",".join(KEYS),
                           JUDGE_NOTIFY_INTERVAL="3600").start()
    yield svc
    svc.stop()


class Watch:
    """What a page did that it must not: console errors, page errors, requests off the origin."""

    def __init__(self, origin: str):
        self.origin, self.problems = origin, []
        self.failed: list[str] = []  # "status METHOD url" of every response >= 400
        self.expected: set[str] = set()  # "status url" the test asked for

    def attach(self, page):
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("request", self._request)
        page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.request.method} {r.url}"))
        return page

    def expect(self, status: int, path: str) -> None:
        """A response ``status`` for ``path`` is the test's point (e.g. a wrong key's 401)."""
        self.expected.add(f"{status} {self.origin}{path}")

    def _console(self, msg):
        # a resource that failed to load is judged by its response (``failed``), not its log line
        if msg.type == "error" and not msg.text.startswith("Failed to load resource:"):
            self.problems.append(f"console: {msg.text}")

    def unexpected(self) -> list[str]:
        return self.problems + [f"response: {f}" for f in self.failed
                                if f.split(" ", 1)[0] + " " + f.split(" ", 2)[2] not in self.expected]

    def _request(self, req):
        url = req.url
        if not (url.startswith(self.origin + "/") or url.startswith(("data:", "blob:", "about:"))):
            self.problems.append(f"request off the origin: {url}")


@pytest.fixture
def watch(web):
    w = Watch(web.url)
    yield w
    problems = w.unexpected()
    assert not problems, "\n".join(problems)


@pytest.fixture
def learner(browser, web, watch, request):
    """``learner(key, **context_args)`` -> a signed-in page (a fresh browser context each)."""
    contexts = []

    def make(key: str = KEYS[0], sign_in: bool = True, **context_args):
        ctx = browser.new_context(**context_args)
        contexts.append(ctx)
        page = watch.attach(ctx.new_page())
        request.node._pages = [*getattr(request.node, "_pages", []), page]
        if sign_in:
            page.goto(web.url + "/")
            page.fill("#key", key)
            page.click("#signin-form button[type=submit]")
            page.wait_for_url(web.url + "/")
        return page

    yield make
    for ctx in contexts:
        ctx.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("call", "teardown"):
        pages = getattr(item, "_pages", []) or ([item.funcargs["page"]] if "page" in item.funcargs else [])
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
        for k, page in enumerate(pages):
            try:
                page.screenshot(path=str(ARTIFACTS / f"{stem}-{k}.png"), full_page=True)
            except Exception:  # noqa: BLE001 - the page may be closed already; the failure stands
                pass
