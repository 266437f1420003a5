"""Where an axis' limits and ticks fall, and how tick labels read.

Limits come from finite data only (positive data on a log axis), with matplotlib's 5 % margins;
ticks are 1-2-2.5-5 steps on a linear axis (as matplotlib's) and decades on a log axis (1-2-5
when it spans under two decades); labels are compact (``0.2``, ``1e-05`` becomes ``1e-5``).
"""

from __future__ import annotations

import math

MARGIN = 0.05


def finite(values, log: bool = False) -> list[float]:
    """The values that can be drawn on the axis: finite, and positive on a log axis."""
    out = []
    for v in values:
        try:
            v = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v) and (v > 0 or not log):
            out.append(v)
    return out


def auto_limits(lo: float | None, hi: float | None, log: bool, sticky=()) -> tuple[float, float]:
    """View limits for data spanning [lo, hi] (None: no data), with margins; a sticky value at the
    data's edge (a bar's baseline) keeps that edge without a margin."""
    if lo is None or hi is None:
        return (1.0, 10.0) if log else (0.0, 1.0)
    if log:
        a, b = auto_limits(math.log10(lo), math.log10(hi), False)
        return 10.0 ** a, 10.0 ** b
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1e-300):
        d = abs(lo) * 0.05 or 0.05
        return lo - d, hi + d
    d = (hi - lo) * MARGIN
    a, b = lo - d, hi + d
    if lo in sticky:
        a = lo
    if hi in sticky:
        b = hi
    return a, b


def _nice_step(span: float, nbins: int) -> float:
    raw = span / max(nbins, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw * (1 - 1e-9):
            return m * mag
    return 10.0 * mag


def linear_ticks(lo: float, hi: float, nbins: int) -> tuple[list[float], float]:
    """Ticks at multiples of a 1-2-2.5-5 step inside [lo, hi] (either order), at most ``nbins``
    intervals; returns (ticks, step)."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [], 1.0
    step = _nice_step(hi - lo, nbins)
    eps = 1e-9 * step
    first, last = math.ceil((lo - eps) / step), math.floor((hi + eps) / step)
    return [k * step for k in range(first, last + 1)], step


def log_ticks(lo: float, hi: float, nbins: int) -> list[float]:
    """Decades inside [lo, hi] (every k-th when there are many); under two decades the 2 and 5
    multiples too, and a linear 1-2-5 set when that still gives fewer than two ticks."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (lo > 0 and math.isfinite(hi)) or hi <= lo:
        return []
    a, b = math.log10(lo), math.log10(hi)
    first, last = math.ceil(a - 1e-9), math.floor(b + 1e-9)
    every = max(1, math.ceil((last - first + 1) / max(nbins, 1)))
    ticks = [10.0 ** k for k in range(first, last + 1) if k % every == 0]
    if b - a < 2:
        ticks = sorted(m * 10.0 ** k for k in range(math.floor(a), math.ceil(b) + 1) for m in (1, 2, 5)
                       if lo * (1 - 1e-9) <= m * 10.0 ** k <= hi * (1 + 1e-9))
    if len(ticks) < 2:
        ticks = [t for t in linear_ticks(lo, hi, nbins)[0] if t > 0]
    return ticks


def label(v: float, step: float | None = None) -> str:
    """A compact tick label: on a linear axis as many decimals as the step needs (0.25, 0.50), else
    up to three significant digits with an unpadded exponent (``1e-5``)."""
    if step is not None and 1e-4 <= step and abs(v) < 1e6:
        decimals = next(d for d in range(12) if abs(step * 10 ** d - round(step * 10 ** d)) < 1e-6 * 10 ** d * step
                        or d == 11)
        s = f"{v:.{decimals}f}"
        return s[1:] if s.startswith("-") and float(s) == 0 else s
    if v == 0:
        return "0"
    s = f"{v:.3g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return s
