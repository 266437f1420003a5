"""Drawing bound views (``judge.views``): SVG, PNG and one offline report.html, with vl-convert.

vl-convert-python runs Vega in an embedded JavaScript engine: ~0.4 s and ~150 MB for its first
conversion, then ~20 ms an SVG. It is imported on first use, in the judge's own process only:
once initialised, it hangs in a forked child, so a process that did not load it refuses to use
it (``RenderError``), and nothing here runs in the sandbox's zygote or children. ``judge local``
draws after the verdict (``render_local``); the service draws an SVG or PNG when one is asked
for and keeps it in the spec's blob set (``judge.service.drawings``).
"""

from __future__ import annotations

import html
import os
import re
import threading
from functools import lru_cache
from pathlib import Path

import orjson

from judge.errors import JudgeError
from judge.views import DARK, LIGHT, SUFFIX, themed

_OWNER: list[int] = []  # the pid that initialised vl-convert
_LOCK = threading.Lock()  # one conversion at a time (the service's routes draw from threads)
# <view>.svg, <view>.png, <view>-dark.svg, <view>-dark.png: drawn from <view>.vl.json
_DRAWN = re.compile(r"^(?P<view>[A-Za-z0-9_.-]+?)(?P<dark>-dark)?\.(?P<fmt>svg|png)$")


class RenderError(JudgeError):
    """A view could not be drawn (the judge's side: the data is only numbers)."""


def _vlc():
    """vl_convert, imported in this process (never in a child forked after it was loaded)."""
    if _OWNER and _OWNER[0] != os.getpid():
        raise RenderError("the plots are drawn only by the process that loaded vl-convert "
                          "(it hangs in a forked child)")
    import vl_convert

    if not _OWNER:
        _OWNER.append(os.getpid())
    return vl_convert


def svg(spec: dict, theme: str = "light") -> str:
    """The view drawn as SVG text."""
    try:
        with _LOCK:
            return '<?xml version="1.0" encoding="UTF-8"?>\n' + _vlc().vegalite_to_svg(themed(spec, theme))
    except ValueError as e:
        raise RenderError(f"could not draw the view: {e}") from e


def png(spec: dict, theme: str = "light", scale: float = 2.0) -> bytes:
    """The view drawn as PNG bytes (``scale`` pixels per SVG unit)."""
    try:
        with _LOCK:
            return _vlc().vegalite_to_png(themed(spec, theme), scale=scale)
    except ValueError as e:
        raise RenderError(f"could not draw the view: {e}") from e


def _bundle_cache() -> Path:
    """Where the bundle is kept between runs: ``$XDG_CACHE_HOME/judge`` or ``~/.cache/judge``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "judge"


@lru_cache(maxsize=1)
def _bundle() -> str:
    """vega, vega-lite and vega-embed as one script (from vl-convert: no network), as
    ``window.vegaEmbed``; a ``</script`` in it written ``<\\/script`` (the same in a string or
    a regular expression) so it cannot close the script element. Bundling takes seconds, so the
    result is kept on disk per vl-convert version (``_bundle_cache``) and read back next time."""
    vlc = _vlc()
    key = "-".join(v.replace("/", "_") for v in (vlc.get_vega_version(), vlc.get_vega_embed_version(),
                                                  vlc.get_vegalite_versions()[-1]))
    path = _bundle_cache() / f"vega-bundle-{key}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text = re.sub(r"</(script)", r"<\\/\1", vlc.javascript_bundle(), flags=re.IGNORECASE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only home: bundle again next time
        pass
    return text


def _script_json(value) -> str:
    """JSON to place inside a <script> element: ``<``, ``>`` and ``&`` as \\u escapes."""
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; background: #fff; color: #1e1e1e; }}
figure {{ margin: 0 0 2rem; }} figcaption {{ max-width: 60rem; margin-top: .5rem; }}
@media (prefers-color-scheme: dark) {{ body {{ background: #1e1e1e; color: #e6e6e6; }} }}
</style></head><body>
<h1>{title}</h1>
{figures}
<script>{bundle}</script>
<script id="views" type="application/json">{specs}</script>
<script id="themes" type="application/json">{themes}</script>
<script>
(function () {{
  var specs = JSON.parse(document.getElementById("views").textContent);
  var themes = JSON.parse(document.getElementById("themes").textContent);
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  specs.forEach(function (spec, i) {{
    spec.config = dark ? themes.dark : themes.light;
    var el = document.getElementById("view-" + i);
    vegaEmbed(el, spec, {{renderer: "svg", actions: false}}).then(function () {{
      el.setAttribute("data-rendered", "true");
    }}).catch(function (err) {{
      el.setAttribute("data-rendered", "error");
      el.textContent = "could not draw this view: " + err;
      console.error(err);
    }});
  }});
}})();
</script></body></html>
"""


def report_html(specs: list[tuple[str, dict]], title: str) -> str:
    """One self-contained page with every ``(name, spec)`` drawn by vega-embed (inlined: it opens
    offline), in the light or dark theme the browser prefers; each view's description below it."""
    figures = "\n".join(
        f'<figure aria-labelledby="caption-{i}"><div class="view" id="view-{i}" data-view="{html.escape(name)}" '
        f'role="img" aria-label="{html.escape(str(spec.get("description", "")))}"></div>'
        f'<figcaption id="caption-{i}">{html.escape(str(spec.get("description", "")))}</figcaption></figure>'
        for i, (name, spec) in enumerate(specs))
    return _PAGE.format(title=html.escape(title), figures=figures, bundle=_bundle(),
                        specs=_script_json([s for _, s in specs]),
                        themes=_script_json({"light": LIGHT, "dark": DARK}))


def bound_specs(out_dir: Path) -> list[tuple[str, dict]]:
    """The bound views in ``out_dir`` (``*.vl.json``), by name."""
    return [(p.name[:-len(SUFFIX)], orjson.loads(p.read_bytes()))
            for p in sorted(Path(out_dir).glob("*" + SUFFIX)) if p.is_file() and not p.is_symlink()]


def render_local(out_dir: Path, title: str) -> list[str]:
    """``judge local``'s drawings: ``<view>.svg`` for each bound view in ``out_dir`` and one
    ``report.html`` with them all. Returns the names written (nothing when there are no views)."""
    specs = bound_specs(out_dir)
    if not specs:
        return []
    written = []
    for name, spec in specs:
        (Path(out_dir) / f"{name}.svg").write_text(svg(spec), encoding="utf-8")
        written.append(f"{name}.svg")
    (Path(out_dir) / "report.html").write_text(report_html(specs, title), encoding="utf-8")
    return written + ["report.html"]


def drawable(name: str) -> tuple[str, str, str] | None:
    """For an artifact name the service can draw on request: (the spec's file name, format,
    theme); None for any other name."""
    m = _DRAWN.match(name)
    if not m:
        return None
    return m.group("view") + SUFFIX, m.group("fmt"), "dark" if m.group("dark") else "light"

