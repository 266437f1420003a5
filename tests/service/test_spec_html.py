"""judge.service.spec_html: every exercise's spec renders (a LaTeX error fails here, not in
front of a learner), math becomes MathML, raw HTML stays text."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.service.spec_html import SpecRenderError, render_markdown, render_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(ROOT.glob("exercises/*/spec.md"))


def test_every_exercise_spec_renders_its_math():
    assert SPECS
    for path in SPECS:
        html = render_spec(path)  # raises SpecRenderError on the first bad expression
        n_dollars = path.read_text().count("$")
        assert html.count("<math") > 0 or n_dollars == 0, path
        assert "katex-error" not in html, path


def test_inline_and_display_math_are_mathml():
    html = render_markdown("Let $x^2$ be.\n\n$$\n\\frac{a}{b}\n$$\n")
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML">' in html
    assert 'display="block"' in html and '<div class="math-display">' in html
    assert "style=" not in html  # the page's CSP admits no inline style


def test_bad_latex_fails_with_the_expression():
    with pytest.raises(SpecRenderError, match=r"\\frac\{1\}"):
        render_markdown("ok $a$ then $\\frac{1}$\n")
    with pytest.raises(SpecRenderError, match="psmallmatrix"):
        render_markdown("$\\begin{psmallmatrix}0&1\\end{psmallmatrix}$\n")


def test_raw_html_is_escaped():
    html = render_markdown("<script>alert(1)</script> and <img src=x onerror=alert(1)>\n")
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
