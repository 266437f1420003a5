"""The figure: a page of panels laid out on a grid with fixed margins, figure-level text
(``suptitle``, ``text``), colorbars, and the SVG document it writes.

Sizes are in inches as in matplotlib and the SVG is in points (72 per inch), so a figure keeps the
size it had when matplotlib drew it. Layout is fixed (``subplots_adjust``): nothing is measured.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from judge.svgplot import style, ticks
from judge.svgplot.axes import TICK_LEN, TICK_PAD, Axes, Image
from judge.svgplot.marks import text_el

_FONT = "DejaVu Sans, Bitstream Vera Sans, Arial, Helvetica, sans-serif"
_ADJUST = {"left": 0.125, "right": 0.9, "bottom": 0.11, "top": 0.88, "wspace": 0.2, "hspace": 0.2}


class Figure:
    """A figure of ``figsize`` inches; draw into it through ``subplots`` and ``savefig`` it."""

    def __init__(self, figsize=(6.4, 4.8)):
        self.width, self.height = 72.0 * figsize[0], 72.0 * figsize[1]
        self.adjust = dict(_ADJUST)
        self.clf()

    def clf(self) -> None:
        """Remove every panel, text and colorbar (the margins stay)."""
        self.axes: list[Axes] = []
        self._texts: list[tuple] = []
        self._colorbars: list[tuple] = []

    def subplots(self, nrows: int = 1, ncols: int = 1):
        """A grid of panels: one Axes, a list (one row or column), or a list of rows."""
        grid = [[Axes(self, (nrows, ncols, r, c)) for c in range(ncols)] for r in range(nrows)]
        for row in grid:
            self.axes.extend(row)
        if nrows == 1 and ncols == 1:
            return grid[0][0]
        if nrows == 1 or ncols == 1:
            return [a for row in grid for a in row]
        return grid

    def subplots_adjust(self, **kw) -> None:
        """Margins and gaps as fractions of the figure (left, right, bottom, top, wspace, hspace)."""
        unknown = set(kw) - set(_ADJUST)
        if unknown:
            raise TypeError(f"subplots_adjust got unknown arguments {sorted(unknown)}")
        self.adjust.update({k: float(v) for k, v in kw.items() if v is not None})

    def suptitle(self, s, fontsize=12.0) -> None:
        """A title centred above every panel."""
        self._texts.append((0.5, 0.98, str(s), "center", "top", float(fontsize), False))

    def text(self, x, y, s, ha="left", va="baseline", fontsize=10.0, wrap=False) -> None:
        """Text at figure fractions (0, 0 bottom left); ``wrap`` breaks long lines to the width."""
        self._texts.append((float(x), float(y), str(s), ha, va, float(fontsize), wrap))

    def colorbar(self, im: Image, ax=None, shrink: float = 1.0) -> None:
        """A colour scale for ``im``, right of ``ax`` (one panel or a list), which make room for it."""
        parents = ax if isinstance(ax, (list, tuple)) else [ax if ax is not None else self.axes[-1]]
        self._colorbars.append((im, parents, float(shrink)))

    def _box(self, ax: Axes) -> list[float]:
        nrows, ncols, r, c = ax.grid
        a = self.adjust
        cw = (a["right"] - a["left"]) * self.width / (ncols + a["wspace"] * (ncols - 1))
        ch = (a["top"] - a["bottom"]) * self.height / (nrows + a["hspace"] * (nrows - 1))
        return [a["left"] * self.width + c * cw * (1 + a["wspace"]),
                (1 - a["top"]) * self.height + r * ch * (1 + a["hspace"]), cw, ch]

    def to_svg(self) -> str:
        """The figure as an SVG document (the same figure gives the same text)."""
        boxes = {id(ax): self._box(ax) for ax in self.axes}
        out = [f'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
               f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{self.width:g}pt" '
               f'height="{self.height:g}pt" viewBox="0 0 {self.width:g} {self.height:g}">\n'
               f'<rect width="100%" height="100%" fill="#fff"/>\n'
               f'<g font-family="{_FONT}" stroke-linecap="butt">']
        cbars = [self._place_colorbar(cb, boxes) for cb in self._colorbars]
        for k, ax in enumerate(self.axes):
            out.extend(ax.render(boxes[id(ax)], f"clip{k}"))
        for k, (im, box) in enumerate(cbars):
            out.extend(_render_colorbar(im, box, f"cmap{k}"))
        for x, y, s, ha, va, fs, wrap in self._texts:
            if wrap:
                per_line = max(10, int(0.9 * self.width / (0.6 * fs)))
                s = "\n".join(w for line in s.split("\n") for w in (textwrap.wrap(line, per_line) or [""]))
            out.append(text_el(x * self.width, (1 - y) * self.height, s, fs, ha, va))
        out.append("</g>\n</svg>\n")
        return "\n".join(out)

    def _place_colorbar(self, cb, boxes):
        """Shrink the parents to 80 % of their width, as matplotlib does (fraction 0.15, pad 0.05),
        and put a bar of aspect 20 in the slot freed on their right."""
        im, parents, shrink = cb
        pb = [boxes[id(a)] for a in parents]
        x0 = min(b[0] for b in pb)
        x1 = max(b[0] + b[2] for b in pb)
        y0 = min(b[1] for b in pb)
        y1 = max(b[1] + b[3] for b in pb)
        for b in pb:
            b[0], b[2] = x0 + (b[0] - x0) * 0.8, b[2] * 0.8
        h = shrink * (y1 - y0)
        return im, (x0 + 0.85 * (x1 - x0), y0 + (y1 - y0 - h) / 2, h / 20, h)

    def savefig(self, path) -> None:
        """Write the SVG to ``path``."""
        Path(path).write_text(self.to_svg(), encoding="utf-8")


def _render_colorbar(im: Image, box, grad_id: str) -> list[str]:
    x, y, w, h = box
    stops = style.CMAPS[im.cmap]
    out = [f'<linearGradient id="{grad_id}" x1="0" y1="1" x2="0" y2="0">'
           + "".join(f'<stop offset="{i / (len(stops) - 1):.3f}" stop-color="{c}"/>' for i, c in enumerate(stops))
           + "</linearGradient>",
           f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" fill="url(#{grad_id})" '
           f'stroke="#000" stroke-width="0.8"/>']
    lo, hi = im.vmin, im.vmax
    if not hi > lo:
        return out
    vals, step = ticks.linear_ticks(lo, hi, 5)
    d = []
    for v in vals:
        py = y + h - (v - lo) / (hi - lo) * h
        d.append(f"M{x + w:.2f} {py:.2f}h{TICK_LEN}")
        out.append(text_el(x + w + TICK_LEN + TICK_PAD, py, ticks.label(v, step), 10.0, "left", "center"))
    if d:
        out.append(f'<path d="{"".join(d)}" stroke="#000" stroke-width="0.8"/>')
    return out
