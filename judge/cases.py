"""Shared case generators for tier tests: dtypes x mask kinds x shapes x value regimes.

Tier tests import this module directly (``from judge.cases import ...``); it depends on torch
only. Everything is drawn from a generator the test passes in (``ctx.generator(salt)``), so a
run is replayable from its seed.

- ``DTYPES``, ``MASK_KINDS``, ``PADS``: the axes every token-level exercise sweeps.
- ``shapes(g)``: fixed corner shapes (1 x 1, 1 x L, B x 1) plus sizes drawn per seed, and one
  large case with B * L >= 16384 (compare that one with the vectorised reference, not a loop).
- ``as_mask(m, kind)``: a bool mask in one of the accepted encodings (bool, 0/1 float32/float64,
  0/1 int64).
- ``strided(inputs)``: the same values as non-contiguous views (column-major, sliced, stepped).
- ``pad(x, valid, fill)``: fill the padded positions of ``x`` (mask 0) with ``fill``.
- ``exact_log(value, dtype)`` / ``onto_bound(value, dtype)``: log-ratios whose ``exp`` lands
  exactly on a bound in ``dtype``; the second gives the smallest and largest such float (the
  neighbouring floats whose exp rounds onto the bound, which a log-space comparison misjudges).
- ``EXTREME_LOG_RATIOS``, ``OVERFLOW_LOG_RATIOS``: magnitudes per dtype whose ``exp`` is finite
  but beyond the +-20 clamps some libraries apply (verl, SkyRL), and ones whose ``exp``
  overflows to inf / underflows to 0.
- ``TINY_LOGP``: log-probabilities whose ``exp`` underflows to 0 in each dtype (a quotient of
  probabilities is then 0/0).
- ``OTHER_MASK_DTYPES``, ``UNHELD_COUNTS``: mask dtypes beyond ``MASK_KINDS`` and per-row
  token counts whose total bfloat16 / float16 cannot hold (557, 2049); ``count_case(g, counts)``
  draws inputs with those rows.
- ``scaled_tolerance(dtype, magnitude)``: (rtol, atol) for values computed from inputs of a
  given magnitude, loose enough for every standard stable formulation (see docs/authoring.md, "Tolerances").
"""

from __future__ import annotations

import math

import torch

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)
# How a mask may be encoded: bool, or 0/1 in a float or integer dtype.
MASK_KINDS = ("bool", "float32", "float64", "int64")
NAN, INF = float("nan"), float("inf")
# Mask dtypes beyond MASK_KINDS that "0/1 in any float or integer dtype" allows, and token counts
# the two 16-bit float dtypes cannot hold: bfloat16 rounds 257 to 256 (and 557 to 556), float16
# rounds 2049 to 2048. A count taken in the mask's own dtype (mask.sum()) is then off; each
# token-level exercise sweeps OTHER_MASK_DTYPES on rows of these lengths, all valid.
OTHER_MASK_DTYPES = (torch.bfloat16, torch.float16, torch.uint8, torch.int32)
UNHELD_COUNTS = {torch.bfloat16: (257, 300), torch.float16: (683, 683, 683)}  # valid tokens per row
# What padding (mask 0) may hold; a correct implementation never reads it.
PADS = (NAN, INF, -INF, 1e30, -1e30)

# |log-ratio| whose exp is finite in the dtype but far beyond a +-20 clamp (exp(20) = 4.9e8).
EXTREME_LOG_RATIOS = {F32: (25.0, 60.0, 85.0), F64: (25.0, 100.0, 700.0)}
# |log-ratio| whose exp overflows to inf (and exp(-x) underflows to exactly 0) in the dtype.
OVERFLOW_LOG_RATIOS = {F32: (100.0, 800.0), F64: (800.0, 1000.0)}
# Log-probabilities whose exp underflows to 0 in the dtype (e^-110 in float32, e^-800 in float64).
TINY_LOGP = {F32: -110.0, F64: -800.0}

# The large shape's token count: B * L >= LARGE_TOKENS once per run.
LARGE_TOKENS = 16384


def as_mask(valid: torch.Tensor, kind: str) -> torch.Tensor:
    """The bool tensor ``valid`` encoded as ``kind`` (one of ``MASK_KINDS``)."""
    if kind == "bool":
        return valid.clone()
    return valid.to({"float32": F32, "float64": F64, "int64": torch.int64}[kind])


def count_case(g: torch.Generator, counts) -> dict:
    """float64 inputs for a mask-dtype test: one row per entry of ``counts`` (e.g. a row of
    ``UNHELD_COUNTS``), that many valid tokens each, rows as long as the longest. Keys ``logp``,
    ``old_logp`` and ``rollout_logp`` ([B, L] log-probs, the log-ratios between them small),
    ``advantages`` ([B], from 1 down to -0.5) and ``valid`` ([B, L] bool); a test takes what its
    functions need and encodes ``valid`` in the dtype it tries."""
    B, L = len(counts), max(counts)
    logp = -(0.05 + 2 * torch.rand(B, L, generator=g, dtype=F64))
    old = logp - 0.15 * torch.randn(B, L, generator=g, dtype=F64)
    rollout = old - 0.3 * torch.randn(B, L, generator=g, dtype=F64)
    valid = torch.arange(L)[None, :] < torch.tensor(list(counts))[:, None]
    return {"logp": logp, "old_logp": old, "rollout_logp": rollout,
            "advantages": torch.linspace(1.0, -0.5, B, dtype=F64), "valid": valid}


def strided(inputs: dict, *, major: tuple[str, ...] = ("logp",), column_major: bool = False) -> dict:
    """The same values as non-contiguous views (any [B, L] / [B] tensor is a valid input): the
    [B, L] inputs named in ``major`` column-major (``x.t().contiguous().t()``, a dense layout that
    ``judge.testing.leaf``'s clone keeps), the other [B, L] ones the first columns of a wider
    tensor (with ``column_major``: column-major too, so that elementwise results are column-major),
    1-D ones every other element of a longer one; anything else as it is. An implementation that
    flattens its inputs or its intermediate results with ``.view(-1)`` raises on them."""
    out = dict(inputs)
    for k, x in inputs.items():
        if not isinstance(x, torch.Tensor):
            continue
        if x.dim() == 2 and (column_major or k in major):
            out[k] = x.t().contiguous().t()
        elif x.dim() == 2:
            out[k] = torch.cat([x, x], dim=1)[:, :x.shape[1]]
        elif x.dim() == 1:
            out[k] = torch.stack([x, x], dim=-1)[:, 0]
    return out


def pad(x: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    """``x`` with its padded positions (``valid`` False; broadcast over trailing dims) set to ``fill``."""
    v = valid
    while v.dim() < x.dim():
        v = v.unsqueeze(-1)
    return torch.where(v, x, torch.tensor(fill, dtype=x.dtype))


def shapes(g: torch.Generator, *, n_drawn: int = 3, max_side: int = 12,
           large: bool = True) -> list[tuple[int, int]]:
    """[B, L] shapes, small to large: the corners (1, 1), (1, L), (B, 1), ``n_drawn`` sizes
    drawn per seed, then (if ``large``) one with B * L >= LARGE_TOKENS, its sides drawn too."""
    side = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=g))  # noqa: E731
    out = [(1, 1), (1, side(2, max_side)), (side(2, max_side), 1)]
    out += [(side(2, max_side), side(2, max_side)) for _ in range(n_drawn)]
    if large:
        B = side(16, 128)
        out.append((B, -(-LARGE_TOKENS // B) + side(0, 7)))
    return out


def exact_log(value: float, dtype: torch.dtype) -> torch.Tensor:
    """A 0-d log-ratio x in ``dtype`` with exp(x) == value rounded to ``dtype`` (searched near log(value))."""
    target = torch.tensor(value, dtype=dtype)
    x = torch.tensor(math.log(value), dtype=dtype)
    for _ in range(64):
        e = torch.exp(x)
        if e == target:
            return x
        x = torch.nextafter(x, torch.tensor(INF if e < target else -INF, dtype=dtype))
    raise AssertionError(f"test construction: no log-ratio gives exactly {value} in {dtype}")


def onto_bound(value: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(smallest, largest) x in ``dtype`` with exp(x) == value in ``dtype`` on each path torch's
    exp may take (a 0-d tensor, a vectorised run, float64 rounded back), so the ratio sits
    exactly on the bound whatever path an implementation's exp takes; every float between them
    lands on it too. Where they differ from log(value), an implementation comparing log-ratios
    with log-bounds decides differently from one comparing the ratio itself."""
    target = torch.tensor(value, dtype=dtype)

    def on(y: torch.Tensor) -> bool:
        return (bool(torch.exp(y) == target) and bool((torch.exp(y.expand(64).contiguous()) == target).all())
                and bool(torch.exp(y.double()).to(dtype) == target))

    x = exact_log(value, dtype)
    if not on(x):
        raise ValueError(f"test construction: exp({float(x)!r}) is not {value} on every path in {dtype}")
    ends = []
    for direction in (-INF, INF):
        y = x
        while True:
            nxt = torch.nextafter(y, torch.tensor(direction, dtype=dtype))
            if not on(nxt):
                break
            y = nxt
        ends.append(y)
    return ends[0], ends[1]


def machine_eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)


def scaled_tolerance(dtype: torch.dtype, magnitude: float = 1.0, *, ops: float = 8.0) -> tuple[float, float]:
    """(rtol, atol) for a result computed in ``dtype`` from inputs of size ``magnitude``.

    A stable formulation of exp(u - c) (softmax, exp(u - logsumexp(u)), a ratio from a log
    difference) inherits the absolute rounding of its argument, ~eps * |u|, as a RELATIVE error
    of the result. ``ops`` allows a handful of such roundings. The floor is the project's
    default (judge.testing.tolerance), so ordinary magnitudes change nothing."""
    base_rtol, base_atol = (1e-9, 1e-12) if dtype == F64 else (2e-5, 1e-6)
    scaled = ops * machine_eps(dtype) * max(1.0, abs(magnitude))
    return max(base_rtol, scaled), max(base_atol, scaled * 1e-3)


def token_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, mask_kind: str = "bool",
               fill: float = NAN, keep: float = 0.75, empty_rows: int = 0, log_ratio_scale: float = 0.3,
               logp_range: tuple[float, float] = (-4.0, -0.05)) -> dict:
    """A token-level batch: ``logp``, ``old_logp``, ``rollout_logp`` [B, L] (padding = ``fill``),
    ``advantages`` [B] and ``mask`` (``mask_kind``); ``valid`` is the bool mask.

    old_logp is uniform in ``logp_range``; logp and rollout_logp differ from it by normal
    log-ratios of scale ``log_ratio_scale``. About ``keep`` of the tokens are valid; the last
    ``empty_rows`` rows (when B > 1, never all of them) have none."""
    lo, hi = logp_range
    old = lo + (hi - lo) * torch.rand(B, L, generator=g, dtype=F64)
    logp = old + log_ratio_scale * torch.randn(B, L, generator=g, dtype=F64)
    rollout = old - log_ratio_scale * torch.randn(B, L, generator=g, dtype=F64)
    adv = torch.randn(B, generator=g, dtype=F64)
    valid = torch.rand(B, L, generator=g) < keep
    if B * L:
        valid[0, 0] = True
    if empty_rows and B > 1:
        valid[B - min(empty_rows, B - 1):] = False
    return {
        "logp": pad(logp, valid, fill).to(dtype), "old_logp": pad(old, valid, fill).to(dtype),
        "rollout_logp": pad(rollout, valid, fill).to(dtype), "advantages": adv.to(dtype),
        "mask": as_mask(valid, mask_kind), "valid": valid,
    }
