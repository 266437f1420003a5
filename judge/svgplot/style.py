"""What a mark looks like: colours, colormaps, matplotlib's format strings, dashes and markers,
and the escaping and text-width estimates every SVG element needs.

Colours follow matplotlib's names (``C0``-``C9``, ``tab:blue``, single letters, greys given as a
string ``"0.85"``) so plots look as they did; an unknown colour raises ``ValueError``.
"""

from __future__ import annotations

import math
import re

CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
_TAB = ["blue", "orange", "green", "red", "purple", "brown", "pink", "gray", "olive", "cyan"]
_NAMED = {f"tab:{n}": c for n, c in zip(_TAB, CYCLE)} | {"tab:grey": CYCLE[7]} | {
    "b": "#0000ff", "g": "#008000", "r": "#ff0000", "c": "#00bfbf", "m": "#bf00bf", "y": "#bfbf00",
    "k": "#000000", "w": "#ffffff", "black": "#000000", "white": "#ffffff", "gray": "#808080",
    "grey": "#808080", "red": "#ff0000", "blue": "#0000ff", "green": "#008000", "orange": "#ffa500",
    "purple": "#800080", "lightgray": "#d3d3d3", "lightgrey": "#d3d3d3", "none": "none"}
# 9 evenly spaced samples of matplotlib's colormaps, interpolated linearly
CMAPS = {
    "coolwarm": ["#3b4cc0", "#6282ea", "#8db0fe", "#b9d0f9", "#dddcdc", "#f5c4ac", "#f4987a", "#dd5f4b", "#b40426"],
    "viridis": ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"],
    "RdBu_r": ["#053061", "#2a71b2", "#6bacd1", "#c2ddec", "#f7f6f6", "#fbccb4", "#e48066", "#ba2832", "#67001f"],
}
DASHES = {"-": None, "--": (3.7, 1.6), "-.": (6.4, 1.6, 1.0, 1.6), ":": (1.0, 1.65)}
_LS_NAMES = {"solid": "-", "dashed": "--", "dashdot": "-.", "dotted": ":", "none": "", "None": "", " ": "", "": ""}
MARKERS = set("o.sDd^vx+*")
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def color(c, default: str = CYCLE[0]) -> str:
    """A matplotlib colour spec as ``#rrggbb`` (or ``none``)."""
    if c is None:
        return default
    if isinstance(c, (tuple, list)) and len(c) in (3, 4):
        return "#" + "".join(f"{round(255 * min(max(float(v), 0.0), 1.0)):02x}" for v in c[:3])
    s = str(c)
    if re.fullmatch(r"C\d", s):
        return CYCLE[int(s[1])]
    if s in _NAMED:
        return _NAMED[s]
    if re.fullmatch(r"#[0-9a-fA-F]{6}", s):
        return s.lower()
    try:
        g = float(s)
    except ValueError:
        raise ValueError(f"unknown colour {s!r}") from None
    if not 0.0 <= g <= 1.0:
        raise ValueError(f"a grey level is between 0 and 1, got {s!r}")
    return "#" + f"{round(255 * g):02x}" * 3


def linestyle(ls) -> str:
    """Normalise a line style to one of ``-``, ``--``, ``-.``, ``:`` or ``""`` (no line)."""
    ls = _LS_NAMES.get(ls, ls)
    if ls not in DASHES and ls != "":
        raise ValueError(f"unknown line style {ls!r}")
    return ls


def parse_fmt(fmt: str) -> tuple[str | None, str | None, str | None]:
    """Split a format string such as ``"o-"``, ``"k:"``, ``"rx"`` into (marker, linestyle, colour);
    a part it does not give is None (a marker alone means no line, as in matplotlib)."""
    marker = ls = col = None
    i = 0
    while i < len(fmt):
        two = fmt[i:i + 2]
        if two in ("--", "-."):
            ls, i = two, i + 2
        elif fmt[i] in "-:":
            ls, i = fmt[i], i + 1
        elif two[0] == "C" and two[1:].isdigit():
            col, i = two, i + 2
        elif fmt[i] in MARKERS:
            marker, i = fmt[i], i + 1
        elif fmt[i] in "bgrcmykw":
            col, i = fmt[i], i + 1
        else:
            raise ValueError(f"unrecognised format string {fmt!r}")
    if ls is None and marker is not None:
        ls = ""
    return marker, ls, col


def cmap_color(name: str, t: float) -> str:
    """The colour at ``t`` in [0, 1] of a colormap (``t`` is clipped)."""
    stops = CMAPS[name]
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    f = t - i
    a, b = stops[i], stops[i + 1]
    return "#" + "".join(f"{round((1 - f) * int(a[k:k + 2], 16) + f * int(b[k:k + 2], 16)):02x}" for k in (1, 3, 5))


def esc(s) -> str:
    """Text for an SVG element or attribute: XML-escaped, characters XML cannot hold dropped."""
    s = _INVALID_XML.sub("", str(s))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def text_width(s: str, size: float) -> float:
    """Estimated width in points of ``s`` at font size ``size`` (DejaVu Sans-like metrics)."""
    w = 0.0
    for ch in s:
        if ch in "il.,:;|!'` ":
            w += 0.32
        elif ch in "mwMW@%":
            w += 0.88
        elif ch.isupper():
            w += 0.7
        else:
            w += 0.6
    return w * size


def marker_path(m: str, x: float, y: float, size: float) -> str:
    """One marker of diameter ``size`` at (x, y) as SVG path data."""
    r = size / 2
    if m in "o.":
        r = r if m == "o" else r / 2
        return f"M{x - r:.2f} {y:.2f}a{r:.2f} {r:.2f} 0 1 0 {2 * r:.2f} 0a{r:.2f} {r:.2f} 0 1 0 {-2 * r:.2f} 0z"
    if m == "s":
        return f"M{x - r:.2f} {y - r:.2f}h{2 * r:.2f}v{2 * r:.2f}h{-2 * r:.2f}z"
    if m in "Dd":
        w = r if m == "D" else 0.6 * r
        return f"M{x:.2f} {y - r:.2f}L{x + w:.2f} {y:.2f}L{x:.2f} {y + r:.2f}L{x - w:.2f} {y:.2f}z"
    if m in "^v":
        s = -1 if m == "^" else 1
        return f"M{x:.2f} {y + s * r:.2f}L{x + r:.2f} {y - s * r:.2f}L{x - r:.2f} {y - s * r:.2f}z"
    if m == "x":
        return f"M{x - r:.2f} {y - r:.2f}L{x + r:.2f} {y + r:.2f}M{x - r:.2f} {y + r:.2f}L{x + r:.2f} {y - r:.2f}"
    if m == "*":  # five-pointed star
        pts = [(x + (r if k % 2 == 0 else 0.4 * r) * math.sin(k * math.pi / 5),
                y - (r if k % 2 == 0 else 0.4 * r) * math.cos(k * math.pi / 5)) for k in range(10)]
        return "M" + "L".join(f"{px:.2f} {py:.2f}" for px, py in pts) + "z"
    return f"M{x - r:.2f} {y:.2f}H{x + r:.2f}M{x:.2f} {y - r:.2f}V{y + r:.2f}"  # "+"


def is_open_marker(m: str) -> bool:
    """Markers drawn as strokes only (no fill)."""
    return m in "x+"
