"""One plot panel: what is drawn in it (lines, bars, steps, markers, spans, an image, text), its
scales and limits, and how it lays itself out in a box of the figure: frame, ticks, labels, title
(each mark is drawn by ``marks``).

Calls mirror matplotlib's ``Axes`` methods of the same names, for the subset the exercises use.
Data never breaks a panel: non-finite points are skipped (a line breaks there), a log axis drops
non-positive values, and limits come from what can be drawn.
"""

from __future__ import annotations

import math

from judge.svgplot import style, ticks
from judge.svgplot import budget
from judge.svgplot.marks import DRAW, legend, text_el

TICK_LEN, TICK_PAD, LABEL_PAD, TITLE_PAD = 3.5, 3.5, 4.0, 6.0
LW = 1.5


def _floats(seq) -> list[float]:
    out = []
    for i, v in enumerate(seq if isinstance(seq, (list, tuple, range)) else list(seq)):
        if not i % budget.EVERY:
            budget.check()
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(math.nan)
    return out


class Image:
    """What ``imshow`` drew, for ``Figure.colorbar``."""

    def __init__(self, cmap: str, vmin: float, vmax: float):
        self.cmap, self.vmin, self.vmax = cmap, vmin, vmax


class Axes:
    """A panel; created by ``Figure.subplots``."""

    def __init__(self, fig, grid: tuple[int, int, int, int]):
        self.figure, self.grid = fig, grid  # (nrows, ncols, row, col)
        self._artists: list[tuple] = []  # (zorder, kind, payload)
        self._legend_items: list[tuple] = []  # (label, kind, payload)
        self._data = {"x": [], "y": []}  # value lists that set the limits
        self._sticky = {"x": [], "y": []}
        self._scale = {"x": "linear", "y": "linear"}
        self._lim = {"x": [None, None], "y": [None, None]}
        self._ticks = {"x": None, "y": None}  # (values, labels or None)
        self._tick_fs = {"x": 10.0, "y": 10.0}
        self._nbins = {"x": None, "y": None}
        self._labels = {"x": None, "y": None, "title": None}
        self._legend_fs = None
        self._cycle = 0
        self._categories = None
        self._image_shape = None

    # -- series -------------------------------------------------------------------------
    def _next_color(self) -> str:
        c = style.CYCLE[self._cycle % len(style.CYCLE)]
        self._cycle += 1
        return c

    def _add(self, zorder, kind, payload, label=None, xs=(), ys=()):
        self._artists.append((zorder, kind, payload))
        self._data["x"].append(xs)
        self._data["y"].append(ys)
        if label is not None and not str(label).startswith("_"):
            self._legend_items.append((str(label), kind, payload))

    def plot(self, *args, color=None, c=None, ls=None, linestyle=None, lw=None, linewidth=None,
             marker=None, ms=None, markersize=None, label=None, alpha=None, zorder=2):
        """Lines and/or markers: ``plot(y)``, ``plot(x, y)``, ``plot(x, y, fmt)``, several groups."""
        groups, args = [], list(args)
        while args:
            if len(args) >= 2 and not isinstance(args[1], str):
                x, y, args = args[0], args[1], args[2:]
            else:
                y, args = args[0], args[1:]
                x = range(len(y))
            fmt = args.pop(0) if args and isinstance(args[0], str) else ""
            groups.append((x, y, fmt))
        for x, y, fmt in groups:
            f_marker, f_ls, f_col = style.parse_fmt(fmt)
            col = style.color(color or c or f_col) if (color or c or f_col) else self._next_color()
            line = style.linestyle(ls if ls is not None else linestyle if linestyle is not None
                                   else f_ls if f_ls is not None else "-")
            xs, ys = _floats(x), _floats(y)
            n = min(len(xs), len(ys))
            p = {"x": xs[:n], "y": ys[:n], "color": col, "ls": line, "lw": float(lw or linewidth or LW),
                 "marker": marker or f_marker, "ms": float(ms or markersize or 6.0), "alpha": alpha}
            self._add(zorder, "line", p, label, p["x"], p["y"])
        return self

    def semilogy(self, *args, **kw):
        """``plot`` with a log y axis."""
        self.set_yscale("log")
        return self.plot(*args, **kw)

    def loglog(self, *args, **kw):
        """``plot`` with both axes log."""
        self.set_xscale("log")
        self.set_yscale("log")
        return self.plot(*args, **kw)

    def scatter(self, x, y, s=36.0, color=None, c=None, marker="o", label=None, alpha=None, zorder=1):
        """Markers of area ``s`` (points squared)."""
        col = style.color(color or c) if (color or c) else self._next_color()
        xs, ys = _floats(x), _floats(y)
        n = min(len(xs), len(ys))
        p = {"x": xs[:n], "y": ys[:n], "color": col, "marker": marker, "ms": math.sqrt(float(s)), "alpha": alpha}
        self._add(zorder, "scatter", p, label, p["x"], p["y"])

    def bar(self, x, height, width=0.8, color=None, label=None, alpha=None, zorder=1):
        """Bars centred on ``x`` (strings: categories at 0, 1, ... named on the axis)."""
        x = list(x)
        if any(isinstance(v, str) for v in x):
            self._categories, x = [str(v) for v in x], list(range(len(x)))
        hs = _floats(height)
        n = min(len(x), len(hs))
        cols = color if isinstance(color, list) else [color] * n  # a list: one colour per bar (a tuple is RGB)
        default = self._next_color() if color is None else None
        bars = [(float(x[i]), float(width), hs[i], style.color(cols[i % max(len(cols), 1)] if cols else None, default))
                for i in range(n)]
        p = {"bars": bars, "alpha": alpha, "color": bars[0][3] if bars else style.color(default)}
        self._sticky["y"].append(0.0)
        heights = [b[2] for b in bars]
        self._add(zorder, "bars", p, label, [b[0] + s * b[1] / 2 for b in bars for s in (-1, 1)],
                  heights + [0.0] * bool(ticks.finite(heights)))  # the baseline, when a bar is drawn

    def stairs(self, values, edges, fill=False, color=None, alpha=None, lw=None, label=None, zorder=1):
        """A step curve over ``edges`` (one more than ``values``), down to 0 at both ends."""
        vs, es = _floats(values), _floats(edges)
        col = style.color(color) if color else self._next_color()
        p = {"v": vs, "e": es, "fill": fill, "color": col, "alpha": alpha, "lw": float(lw or LW)}
        self._sticky["y"].append(0.0)
        self._add(zorder, "stairs", p, label, es, vs + [0.0] * bool(ticks.finite(vs)))

    def vlines(self, x, ymin, ymax, colors=None, alpha=None, lw=None, label=None, zorder=1):
        """Vertical segments from ``ymin`` to ``ymax`` (scalars or one per x)."""
        xs = _floats(x)
        lo = _floats(ymin) if isinstance(ymin, (list, tuple)) else [float(ymin)] * len(xs)
        hi = _floats(ymax) if isinstance(ymax, (list, tuple)) else [float(ymax)] * len(xs)
        n = min(len(xs), len(lo), len(hi))
        p = {"x": xs[:n], "lo": lo[:n], "hi": hi[:n], "color": style.color(colors), "alpha": alpha,
             "lw": float(lw or LW)}
        self._add(zorder, "vlines", p, label, p["x"], p["lo"] + p["hi"])

    def axhline(self, y, color=None, c=None, ls="-", lw=None, zorder=2, label=None, alpha=None):
        """A horizontal line across the panel."""
        p = {"v": float(y), "color": style.color(color or c), "ls": style.linestyle(ls), "lw": float(lw or LW),
             "alpha": alpha}
        self._add(zorder, "hline", p, label, (), [p["v"]])

    def axvline(self, x, color=None, c=None, ls="-", lw=None, zorder=2, label=None, alpha=None):
        """A vertical line across the panel."""
        p = {"v": float(x), "color": style.color(color or c), "ls": style.linestyle(ls), "lw": float(lw or LW),
             "alpha": alpha}
        self._add(zorder, "vline", p, label, [p["v"]], ())

    def axhspan(self, ymin, ymax, color=None, alpha=None, label=None, zorder=1):
        """A band across the panel between two y values."""
        p = {"lo": float(ymin), "hi": float(ymax), "color": style.color(color), "alpha": alpha}
        self._add(zorder, "hspan", p, label, (), [p["lo"], p["hi"]])

    def axvspan(self, xmin, xmax, color=None, alpha=None, label=None, zorder=1):
        """A band across the panel between two x values."""
        p = {"lo": float(xmin), "hi": float(xmax), "color": style.color(color), "alpha": alpha}
        self._add(zorder, "vspan", p, label, [p["lo"], p["hi"]], ())

    def imshow(self, data, cmap="coolwarm", vmin=None, vmax=None) -> Image:
        """A grid of coloured cells, row 0 at the top, square cells (``aspect="equal"``)."""
        rows = [_floats(r) for r in data]
        vals = ticks.finite(v for r in rows for v in r)
        vmin = float(vmin) if vmin is not None else (min(vals) if vals else 0.0)
        vmax = float(vmax) if vmax is not None else (max(vals) if vals else 1.0)
        if cmap not in style.CMAPS:
            raise ValueError(f"unknown colormap {cmap!r}")
        im = Image(cmap, vmin, vmax)
        self._image_shape = (len(rows), max((len(r) for r in rows), default=0))
        self._add(0, "image", {"rows": rows, "im": im})
        return im

    def text(self, x, y, s, ha="left", va="baseline", fontsize=10.0, color="k"):
        """Text at data coordinates (not clipped to the panel)."""
        self._artists.append((3, "text", {"x": float(x), "y": float(y), "s": str(s), "ha": ha, "va": va,
                                          "fs": float(fontsize), "color": style.color(color)}))

    # -- axes ---------------------------------------------------------------------------
    def set_xscale(self, scale):
        self._scale["x"] = _check_scale(scale)

    def set_yscale(self, scale):
        self._scale["y"] = _check_scale(scale)

    def set_xlim(self, left=None, right=None):
        if isinstance(left, (tuple, list)):
            left, right = left
        self._lim["x"] = [left, right]

    def set_ylim(self, bottom=None, top=None):
        if isinstance(bottom, (tuple, list)):
            bottom, top = bottom
        self._lim["y"] = [bottom, top]

    def get_xlim(self) -> tuple[float, float]:
        return self._limits("x")

    def get_ylim(self) -> tuple[float, float]:
        return self._limits("y")

    def set_xticks(self, values, labels=None, fontsize=None):
        self._set_ticks("x", values, labels, fontsize)

    def set_yticks(self, values, labels=None, fontsize=None):
        self._set_ticks("y", values, labels, fontsize)

    def _set_ticks(self, axis, values, labels, fontsize):
        vals = _floats(values)
        self._ticks[axis] = (vals, [str(v) for v in labels] if labels is not None else None)
        if fontsize is not None:
            self._tick_fs[axis] = float(fontsize)

    def locator_params(self, axis="both", nbins=None):
        """At most ``nbins`` intervals between the automatic ticks."""
        for a in ("x", "y") if axis == "both" else (axis,):
            self._nbins[a] = nbins

    def minorticks_off(self):
        """Minor ticks are never drawn: kept for matplotlib-shaped call sites."""

    def set_xlabel(self, s, fontsize=10.0):
        self._labels["x"] = (str(s), float(fontsize))

    def set_ylabel(self, s, fontsize=10.0):
        self._labels["y"] = (str(s), float(fontsize))

    def set_title(self, s, fontsize=12.0):
        self._labels["title"] = (str(s), float(fontsize))

    def legend(self, fontsize=10.0):
        """A legend of the labelled series, placed where it covers the fewest data points."""
        self._legend_fs = float(fontsize)

    # -- rendering ----------------------------------------------------------------------
    def _limits(self, axis: str) -> tuple[float, float]:
        log = self._scale[axis] == "log"
        fixed = self._lim[axis]
        if self._image_shape is not None:
            n = self._image_shape[1] if axis == "x" else self._image_shape[0]
            auto = ((-0.5, n - 0.5) if axis == "x" else (n - 0.5, -0.5)) if n else (-0.5, 0.5)
        else:
            vals = [v for seq in self._data[axis] for v in ticks.finite(seq, log)]
            if self._ticks[axis] is not None:  # explicit ticks stay visible, as in matplotlib
                vals += ticks.finite(self._ticks[axis][0], log)
            auto = ticks.auto_limits(min(vals) if vals else None, max(vals) if vals else None, log,
                                     self._sticky[axis])
        lo, hi = (f if f is not None and math.isfinite(f) and (f > 0 or not log) else a
                  for f, a in zip(fixed, auto))
        if lo == hi:  # a fixed limit equal to the other one: widen as for constant data
            return ticks.auto_limits(float(lo), float(hi), log)
        return float(lo), float(hi)

    def _tick_set(self, axis: str, lo: float, hi: float, length: float):
        a, b = min(lo, hi), max(lo, hi)
        if self._ticks[axis] is not None:
            vals, labels = self._ticks[axis]
            labels = labels or [ticks.label(v) for v in vals]
            return [(v, t) for v, t in zip(vals, labels) if a - 1e-9 * (b - a) <= v <= b + 1e-9 * (b - a)]
        if axis == "x" and self._categories is not None:
            return [(float(i), t) for i, t in enumerate(self._categories) if a <= i <= b]
        fs = self._tick_fs[axis]
        nbins = self._nbins[axis] or max(1, min(9, int(length / (fs * (3 if axis == "x" else 2)))))
        if self._scale[axis] == "log":
            vals = ticks.log_ticks(a, b, nbins)
            return [(v, ticks.label(v)) for v in vals]
        vals, step = ticks.linear_ticks(a, b, nbins)
        return [(v, ticks.label(v, step)) for v in vals]

    def render(self, box, clip_id: str) -> list[str]:
        """SVG elements for this panel drawn in ``box`` = (x0, y0, w, h) in points, y down."""
        x0, y0, w, h = box
        (xa, xb), (ya, yb) = self._limits("x"), self._limits("y")
        if self._image_shape is not None and self._image_shape[0] and self._image_shape[1]:
            ratio = abs(yb - ya) / abs(xb - xa)  # square cells: shrink the box, keep it centred
            if h / w > ratio:
                y0, h = y0 + (h - w * ratio) / 2, w * ratio
            else:
                x0, w = x0 + (w - h / ratio) / 2, h / ratio
        fx = _transform(xa, xb, x0, x0 + w, self._scale["x"] == "log")
        fy = _transform(ya, yb, y0 + h, y0, self._scale["y"] == "log")
        out = [f'<clipPath id="{clip_id}"><rect x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}"/>'
               f'</clipPath><g clip-path="url(#{clip_id})">']
        obstacles: list[tuple[float, float, float, float]] = []  # what a legend should not cover
        texts = []
        for z, kind, p in sorted(self._artists, key=lambda a: a[0]):
            budget.check()
            if kind == "text":
                texts.append(p)
                continue
            out.extend(DRAW[kind](p, fx, fy, (x0, y0, w, h), obstacles))
        out.append("</g>")
        for p in texts:
            px, py = fx(p["x"]), fy(p["y"])
            if px is not None and py is not None:
                out.append(text_el(px, py, p["s"], p["fs"], p["ha"], p["va"], p["color"]))
        out.append(f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}" fill="none" '
                   f'stroke="#000" stroke-width="0.8"/>')
        out.extend(self._render_axes(x0, y0, w, h, fx, fy, (xa, xb), (ya, yb)))
        if self._legend_fs is not None and self._legend_items:
            out.extend(legend(self._legend_items, self._legend_fs, (x0, y0, w, h), obstacles))
        return out

    def _render_axes(self, x0, y0, w, h, fx, fy, xl, yl) -> list[str]:
        out, path = [], []
        xt = [(fx(v), t) for v, t in self._tick_set("x", *xl, w)]
        yt = [(fy(v), t) for v, t in self._tick_set("y", *yl, h)]
        xt = [(p, t) for p, t in xt if p is not None]
        yt = [(p, t) for p, t in yt if p is not None]
        fsx, fsy, bottom = self._tick_fs["x"], self._tick_fs["y"], y0 + h
        for p, t in xt:
            path.append(f"M{p:.2f} {bottom:.2f}v{TICK_LEN}")
            out.append(text_el(p, bottom + TICK_LEN + TICK_PAD, t, fsx, "center", "top"))
        for p, t in yt:
            path.append(f"M{x0:.2f} {p:.2f}h{-TICK_LEN}")
            out.append(text_el(x0 - TICK_LEN - TICK_PAD, p, t, fsy, "right", "center"))
        if path:
            out.append(f'<path d="{"".join(path)}" stroke="#000" stroke-width="0.8"/>')
        if self._labels["x"]:
            s, fs = self._labels["x"]
            top = bottom + TICK_LEN + TICK_PAD + (1.17 * fsx if xt else 0) + LABEL_PAD
            out.append(text_el(x0 + w / 2, top, s, fs, "center", "top"))
        if self._labels["y"]:
            s, fs = self._labels["y"]
            tw = max((style.text_width(t, fsy) for _, t in yt), default=0.0)
            right = x0 - TICK_LEN - TICK_PAD - tw - LABEL_PAD
            out.append(text_el(right, y0 + h / 2, s, fs, "center", "bottom", rotate=True))
        if self._labels["title"]:
            s, fs = self._labels["title"]
            out.append(text_el(x0 + w / 2, y0 - TITLE_PAD, s, fs, "center", "bottom"))
        return out


def _check_scale(scale: str) -> str:
    if scale not in ("linear", "log"):
        raise ValueError(f"scale must be 'linear' or 'log', got {scale!r}")
    return scale


def _transform(lo, hi, p0, p1, log):
    """Data -> points along one axis; None for a value the axis cannot show."""
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    k = (p1 - p0) / (hi - lo)

    def f(v):
        if not math.isfinite(v) or (log and v <= 0):
            return None
        return p0 + ((math.log10(v) if log else v) - lo) * k
    return f
