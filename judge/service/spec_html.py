"""An exercise's ``spec.md`` as HTML for the learner's page: Markdown (markdown-it-py, tables,
``$…$`` and ``$$…$$`` math through mdit-py-plugins' dollarmath) with the math rendered by KaTeX
to MathML, in one ``node`` call per spec (``static/katex-render.cjs``, KaTeX from the npm packages
``scripts/build-web.sh`` installs). Raw HTML in the Markdown is escaped, never passed through.

A LaTeX error is the author's, not the learner's: ``render_spec`` raises ``SpecRenderError``
naming the expression (tests/service/test_spec_html.py renders every exercise's spec), and the
page shows the message instead of half-rendered math. Rendered specs are cached by content.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from judge.errors import JudgeError

ROOT = Path(__file__).resolve().parents[2]
KATEX_SCRIPT = Path(__file__).resolve().parent / "static" / "katex-render.cjs"
MATH_TOKENS = {"math_inline": False, "math_inline_double": True, "math_block": True,
               "math_block_label": True}
_cache: dict[str, str] = {}
_lock = threading.Lock()


class SpecRenderError(JudgeError):
    """The spec could not be rendered: bad LaTeX, or KaTeX (node, the npm packages) missing."""


def node_modules() -> Path:
    """Where KaTeX is installed: ``JUDGE_NODE_MODULES``, else the checkout's ``node_modules``."""
    return Path(os.environ.get("JUDGE_NODE_MODULES") or ROOT / "node_modules")


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
    return md


def katex_many(items: list[tuple[str, bool]]) -> list[str]:
    """KaTeX's MathML for each (tex, display) pair; ``SpecRenderError`` on the first bad one."""
    if not items:
        return []
    node = shutil.which("node")
    modules = node_modules()
    if node is None or not (modules / "katex").is_dir():
        raise SpecRenderError(f"rendering math needs node and KaTeX in {modules}: run `make setup` "
                              "(scripts/build-web.sh installs the npm packages)")
    payload = json.dumps([{"tex": t, "display": d} for t, d in items])
    proc = subprocess.run([node, str(KATEX_SCRIPT)], input=payload, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "NODE_PATH": str(modules)})
    if proc.returncode != 0:
        raise SpecRenderError(f"KaTeX failed: {proc.stderr.strip()[-500:]}")
    out = json.loads(proc.stdout)
    for (tex, _), r in zip(items, out):
        if "error" in r:
            raise SpecRenderError(f"bad LaTeX in the spec: {r['error']} (in ${tex}$)")
    return [r["html"] for r in out]


def render_markdown(text: str) -> str:
    """``text`` (Markdown with math) as HTML, math as MathML; not cached."""
    md = _markdown()
    tokens = md.parse(text)
    wanted: list[tuple[str, bool]] = []
    for tok in tokens:
        for t in [tok, *(tok.children or [])]:
            if t.type in MATH_TOKENS:
                wanted.append((t.content.strip(), MATH_TOKENS[t.type]))
    unique = list(dict.fromkeys(wanted))
    rendered = dict(zip(unique, katex_many(unique)))

    def rule(display: bool):
        def render(self, tokens, idx, options, env):
            html = rendered[(tokens[idx].content.strip(), display)]
            return f'<div class="math-display">{html}</div>\n' if display else html
        return render

    for name, display in MATH_TOKENS.items():
        md.add_render_rule(name, rule(display))
    return md.renderer.render(tokens, md.options, {})


def render_spec(path: Path) -> str:
    """The spec at ``path`` as HTML, cached by its content (a changed file renders again)."""
    text = Path(path).read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        hit = _cache.get(digest)
    if hit is None:
        hit = render_markdown(text)
        with _lock:
            _cache[digest] = hit
    return hit
