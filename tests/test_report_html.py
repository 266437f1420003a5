"""``report.html`` (``judge.views_render.report_html``) opens offline in Debian's chromium and
draws every view of every exercise as SVG with marks, with no console errors, in both themes.

Chromium is launched by Playwright (pytest-playwright's fixtures), headless, with the flags that
keep it from reaching for hosts this machine cannot reach; Playwright gives each launch a fresh
profile directory of its own (it refuses a ``--user-data-dir`` argument to ``launch``). Every
request other than the page itself is refused and recorded: the page must need none.
"""

from __future__ import annotations

import copy
import shutil

import pytest

from judge import views, views_render
from judge.exercise import discover
from judge.testing import memo

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser_type_launch_args():
    if not shutil.which("chromium") and not shutil.os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make setup` installs it (apt-get install -y chromium)")
    return {"executable_path": CHROMIUM, "args": ARGS, "headless": True}


def _nudged(metrics):
    """The reference's metrics with every float 10% larger: a submission whose curves sit apart."""
    def go(v):
        if isinstance(v, float):
            return v * 1.1
        if isinstance(v, list):
            return [go(x) for x in v]
        if isinstance(v, dict):
            return {k: go(x) for k, x in v.items()}
        return v
    return go(copy.deepcopy(metrics))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """report.html with every view of every exercise: yours (nudged) beside the reference's."""
    specs = []
    for slug, ex in sorted(discover().items()):
        ref = memo((slug, "t3"), lambda ex=ex: ex.experiment.run(ex.ref, None))
        for view in views.exercise_views(ex.root):
            spec, _ = views.bind(view, _nudged(ref), views.reference_rows(view, ex))
            specs.append((f"{slug}/{view.name}", spec))
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(views_render.report_html(specs, "every view"), encoding="utf-8")
    return path, [name for name, _ in specs]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_report_draws_every_view_offline_without_console_errors(page, report, scheme):
    path, names = report
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def refuse(route):
        if route.request.url != path.as_uri():
            requests.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", refuse)
    page.emulate_media(color_scheme=scheme)
    page.goto(path.as_uri())
    page.wait_for_function(
        "[...document.querySelectorAll('.view')].every(e => e.getAttribute('data-rendered'))", timeout=60_000)
    drawn = page.eval_on_selector_all(".view", """els => els.map(e => ({
        name: e.dataset.view, state: e.getAttribute('data-rendered'),
        svg: !!e.querySelector('svg'),
        marks: e.querySelectorAll('svg .mark-line path, svg .mark-rect path, svg .mark-symbol path,'
                                  + ' svg .mark-rule line, svg .mark-text text').length,
        background: (e.querySelector('svg > rect') || {getAttribute: () => ''}).getAttribute('fill')
                    || getComputedStyle(e.querySelector('svg') || e).backgroundColor}))""")
    assert [d["name"] for d in drawn] == names
    for d in drawn:
        assert d["state"] == "true" and d["svg"] and d["marks"] > 0, d
        assert d["background"] in ((("#1e1e1e", "rgb(30, 30, 30)") if scheme == "dark"
                                    else ("#ffffff", "rgb(255, 255, 255)"))), d  # the theme drawn
    assert errors == [] and requests == []
    body = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert body == ("rgb(30, 30, 30)" if scheme == "dark" else "rgb(255, 255, 255)")
