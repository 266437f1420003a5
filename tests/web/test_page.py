"""The learner's page in a real Chromium (tests/web/conftest.py): sign in, read the spec, edit,
Run, Submit, progress, result, plots, history, diff, drafts, isolation between learners, the
keyboard alone, dark mode. Every test also fails on a console error or an off-origin request."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from judge.wrong import load_wrong_solutions

ROOT = Path(__file__).resolve().parents[2]
SLUG = "glm5_mis"
STARTER = (ROOT / "exercises" / SLUG / "starter.py").read_text()
SOLUTION = (ROOT / "reference" / SLUG / "solution.py").read_text()
WRONG = next(w for w in load_wrong_solutions(ROOT / "reference" / SLUG, ROOT / "exercises" / SLUG / "spec.md")
             if w.name == "clamp_instead_of_zero")  # rejected by T1 (T0 may fail too) with a message
GRADED = 120_000  # ms a verdict may take on a busy 2-core machine


def until(page, js: str, timeout: float = 30.0) -> None:
    """Wait until the expression ``js`` is truthy in the page (polled with ``evaluate``, which
    the CSP admits; ``wait_for_function`` evaluates strings, which 'unsafe-eval' would need)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if page.evaluate(js):
                return
        except PlaywrightError as e:  # a navigation in progress: look again on the new page
            if "context was destroyed" not in str(e) and "undefined" not in str(e):
                raise
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {js}")
        page.wait_for_timeout(50)


def editor_text(page) -> str:
    return page.evaluate("window.judgeEditor.state.doc.toString()")


PASTE = """code => {
  const data = new DataTransfer();
  data.setData("text/plain", code);
  document.activeElement.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
}"""


def paste(page, code: str) -> None:
    """Ctrl+A then a paste into the focused editor (the clipboard event CodeMirror handles)."""
    page.keyboard.press("ControlOrMeta+a")
    page.evaluate(PASTE, code)
    assert editor_text(page) == code


def replace_code(page, code: str) -> None:
    """As a learner pastes: focus the editor, select all, paste."""
    page.click("#editor .cm-content")
    paste(page, code)


def open_exercise(page, web):
    page.goto(f"{web.url}/exercises/{SLUG}")
    until(page, "window.judgeEditor !== undefined")


def wait_verdict(page, expected: str):
    page.wait_for_selector(f"#verdict[data-verdict={expected}]", timeout=GRADED)


def test_sign_in_keeps_the_key_in_an_httponly_strict_cookie(learner, web, watch):
    watch.expect(401, "/signin")  # the wrong key below
    page = learner(sign_in=False)
    page.goto(web.url + "/")
    assert page.url.startswith(web.url + "/signin")
    page.fill("#key", "not-a-key")
    page.click("#signin-form button[type=submit]")
    assert "not valid" in page.inner_text("#signin-error")
    page.fill("#key", "web-key-alice")
    page.click("#signin-form button[type=submit]")
    page.wait_for_url(web.url + "/")
    session = next(c for c in page.context.cookies() if c["name"] == "judge_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert "judge_session" not in page.evaluate("document.cookie")
    stored = page.evaluate("JSON.stringify(Object.assign({}, localStorage)) + location.href")
    assert "web-key-alice" not in stored
    item = page.locator(f".exercise[data-slug={SLUG}]")
    assert item.locator("h2 a").get_attribute("href") == f"/exercises/{SLUG}"
    page.click("#signout")
    page.wait_for_url(web.url + "/signin")
    page.goto(web.url + "/")
    assert page.url.startswith(web.url + "/signin")


def test_the_spec_math_is_rendered_and_the_editor_holds_the_starter(learner, web):
    page = learner(viewport={"width": 1366, "height": 768})  # a laptop's screen
    open_exercise(page, web)
    # nothing wider than the screen: long math and code scroll in their own boxes
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.locator("#spec math").count() >= 20  # KaTeX's MathML, rendered by the server
    assert page.locator("#spec .math-display math[display=block]").count() >= 3
    assert page.locator("#spec .katex-error").count() == 0
    assert "masked_is_weights(logp, rollout_logp, mask" in page.inner_text("#spec .signatures")
    assert editor_text(page) == STARTER
    assert page.locator("#spec a[href='https://arxiv.org/abs/2602.15763']").count() >= 1
    official = page.locator("a", has_text="official code")  # the exercise's official-code links
    assert official.count() >= 1 and all(h.startswith("https://") for h in
                                         (official.nth(k).get_attribute("href") for k in range(official.count())))


def test_run_a_correct_solution_then_submit_a_wrong_one(learner, web):
    page = learner()
    open_exercise(page, web)
    replace_code(page, SOLUTION)
    page.click("#run")
    wait_verdict(page, "accepted")
    tiers = page.locator("#result .tier")
    assert tiers.count() == 4
    for k in range(4):
        assert tiers.nth(k).get_attribute("data-status") == "passed"
    assert page.locator("#progress .test[data-status=passed]").count() > 0  # live from the stream
    # the verdict shown is the one this Run made (the bench's mark names it: judgeShownId)
    until(page, "document.querySelectorAll('#history tbody tr').length >= 1")
    assert page.evaluate("window.judgeShownId") == page.locator("#history tbody tr").first.get_attribute("data-id")
    assert page.inner_text("#seed").strip().isdigit()
    facts = page.inner_text("#result .facts")  # the resources used
    assert all(w in facts for w in ("CPU", "wall", "peak memory", "calls")) and " MB" in facts
    # the plots: every view drawn as SVG with marks, and the metrics table
    page.wait_for_selector("#plots .view svg .mark-line path, #plots .view svg .mark-symbol path, "
                           "#plots .view svg .mark-rect path", state="attached", timeout=30_000)
    assert page.locator("#plots .view").count() >= 1
    assert page.locator("#plots .view .error").count() == 0
    page.wait_for_selector("#metrics-table tbody tr")

    replace_code(page, WRONG.source)
    page.keyboard.press("ControlOrMeta+Shift+Enter")  # Submit from the editor
    wait_verdict(page, "rejected")
    failed = page.locator("#result .tier[data-status=failed]")
    assert WRONG.expect_tier in [failed.nth(k).get_attribute("data-tier") for k in range(failed.count())]
    message = page.locator("#result .failure .message").first.inner_text()
    assert len(message) > 10

    # the history lists both, newest first; one loads back; two diff
    until(page, "document.querySelectorAll('#history tbody tr').length >= 2")
    rows = page.locator("#history tbody tr")
    assert rows.nth(0).get_attribute("data-verdict") == "rejected"
    assert rows.nth(1).get_attribute("data-verdict") == "accepted"
    rows.nth(1).locator("button.load").click()
    until(page, "window.judgeEditor.state.doc.toString().length > 0 && "
                           "!window.judgeEditor.state.doc.toString().includes('ratio.clamp(1.0 - clip_low')")
    assert editor_text(page) == SOLUTION
    rows.nth(0).locator("input.pick").check()
    rows.nth(1).locator("input.pick").check()
    page.click("#diff")
    page.wait_for_selector("#diff-view .cm-mergeView")
    changed = " ".join(page.locator("#diff-view .cm-changedLine").all_inner_texts())
    assert "ratio.clamp(1.0 - clip_low" in changed  # the wrong attempt's line
    assert "torch.where(keep, ratio, zero)" in changed  # the correct one's


def test_the_draft_survives_a_reload_and_reset_restores_the_starter(learner, web):
    page = learner("web-key-carol")  # no attempts: the page starts from the starter
    open_exercise(page, web)
    assert editor_text(page) == STARTER
    code = STARTER + "\n# my draft <script>alert(1)</script>\n"
    replace_code(page, code)
    until(page, f"localStorage.getItem('judge:draft:{SLUG}') !== null")
    page.reload()
    until(page, "window.judgeEditor !== undefined")
    assert editor_text(page) == code
    page.once("dialog", lambda d: d.accept())
    page.click("#reset")
    assert editor_text(page) == STARTER
    assert page.evaluate(f"localStorage.getItem('judge:draft:{SLUG}')") is None


def test_another_learner_sees_none_of_it(learner, web, watch):
    alice = learner()
    open_exercise(alice, web)
    replace_code(alice, SOLUTION)
    alice.click("#run")
    wait_verdict(alice, "accepted")
    alice.wait_for_selector("#history tbody tr")
    sid = alice.locator("#history tbody tr").first.get_attribute("data-id")

    bob = learner("web-key-bob")
    assert bob.locator(f".exercise[data-slug={SLUG}] .status").get_attribute("data-status") == "not tried"
    open_exercise(bob, web)
    until(bob, "document.getElementById('history').dataset.loaded === '1'")  # fetched on load
    assert bob.locator("#history tbody tr").count() == 0
    assert editor_text(bob) == STARTER
    for path in (f"/submissions/{sid}", f"/pages/submissions/{sid}/code", f"/submissions/{sid}/events"):
        watch.expect(404, path)
        assert bob.evaluate(f"fetch('{path}').then(r => r.status)") == 404
    # Alice in a new browser (no draft there): her latest attempt is loaded, not the starter
    again = learner()
    open_exercise(again, web)
    until(again, "document.getElementById('history').dataset.loaded === '1'")
    until(again, "window.judgeEditor.state.doc.toString() !== " + json.dumps(STARTER))
    assert editor_text(again) == SOLUTION
    # and her list shows her standing
    alice.goto(web.url + "/")
    assert alice.locator(f".exercise[data-slug={SLUG}] .status").get_attribute("data-status") in ("rejected", "accepted")


def test_keyboard_only(learner, web):
    page = learner(sign_in=False)
    page.goto(web.url + "/")
    # the key field has the focus (autofocus, applied after load: typing sooner loses keys)
    until(page, "document.activeElement !== null && document.activeElement.id === 'key'")
    page.keyboard.type("web-key-alice")
    page.keyboard.press("Enter")
    page.wait_for_url(web.url + "/")
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == f"/exercises/{SLUG}":
            break
    else:
        pytest.fail("the exercise's link cannot be reached with Tab")
    page.keyboard.press("Enter")
    until(page, "window.judgeEditor !== undefined")
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('cm-content')"):
            break
    else:
        pytest.fail("the editor cannot be reached with Tab")
    paste(page, SOLUTION)
    page.keyboard.press("ControlOrMeta+Enter")  # Run
    wait_verdict(page, "accepted")
    assert page.locator("#result[aria-live]").count() == 1
    page.click("#editor .cm-content")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert not page.evaluate("!!document.activeElement.closest('.cm-editor')")  # Esc then Tab leaves it


def test_dark_mode(learner, web):
    page = learner(color_scheme="dark")
    open_exercise(page, web)

    def luminance(selector: str, prop: str) -> float:
        rgb = page.eval_on_selector(selector, f"e => getComputedStyle(e).{prop}")
        r, g, b = (int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

    assert luminance("body", "backgroundColor") < 0.2
    assert luminance("#spec math", "color") > 0.7  # math is text: it follows the theme
    assert luminance("#editor .cm-editor", "backgroundColor") < 0.3
    page.click("#show-reference")
    page.wait_for_selector("#reference-plots .view svg .mark-text text, #reference-plots .view svg .role-axis-label text",
                           state="attached", timeout=30_000)
    assert page.locator("#reference-plots .view .error").count() == 0
    label = page.locator("#reference-plots .view svg .role-axis-label text").first.get_attribute("fill")
    r, g, b = (int(label[k:k + 2], 16) for k in (1, 3, 5))
    assert (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 > 0.6  # axis labels readable on the dark page


def test_switching_to_dark_redraws_the_plots_once(learner, web):
    """The system's theme changes while the reference's plots are shown: they are drawn again
    in the dark theme, one set of them (not a second click handler, not a second set)."""
    page = learner(color_scheme="light")
    open_exercise(page, web)
    page.click("#show-reference")
    label = "#reference-plots .view svg .role-axis-label text"
    page.wait_for_selector(label, state="attached", timeout=30_000)
    views = page.locator("#reference-plots .view").count()
    before = page.locator(label).first.get_attribute("fill")
    assert views >= 1 and _light(before) < 0.4
    page.emulate_media(color_scheme="dark")
    until(page, f"document.querySelectorAll('#reference-plots .view').length === {views} && "
                f"[...document.querySelectorAll({json.dumps(label)})].length > 0 && "
                f"document.querySelector({json.dumps(label)}).getAttribute('fill') !== {json.dumps(before)}")
    assert _light(page.locator(label).first.get_attribute("fill")) > 0.6
    assert page.locator("#reference-plots .view").count() == views
    assert page.locator("#reference-plots .view .error").count() == 0


def _light(fill: str) -> float:
    """The relative luminance of an SVG fill, ``#rgb`` or ``#rrggbb``."""
    digits = fill.lstrip("#")
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    r, g, b = (int(digits[k:k + 2], 16) for k in (0, 2, 4))
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_docs_render_from_local_assets(learner, web):
    page = learner(sign_in=False)
    page.goto(web.url + "/docs")
    page.wait_for_selector("#swagger-ui .opblock-summary-path", timeout=30_000)
    paths = page.locator("#swagger-ui .opblock-summary-path").all_inner_texts()
    assert "/submit" in paths


def test_a_submissions_output_is_shown_as_text(learner, web):
    page = learner("web-key-carol")
    open_exercise(page, web)
    hostile = "<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>"
    replace_code(page, SOLUTION + f"\nprint({hostile!r})\n")
    page.click("#run")
    wait_verdict(page, "accepted")
    assert hostile in page.locator("#result details pre").text_content()
    assert page.locator("#result img, #result script").count() == 0
    assert page.evaluate("window.pwned") is None
