"""Shared case generators for the tier tests of the token-level exercises (issue 17).

The axes a held-out wrong implementation hides behind, one helper each:

* shapes: ``sizes`` draws (B, L) per seed, always with the edges B = 1, L = 1 and, once, a batch
  with B * L >= 16k (``LARGE_TOKENS``) to compare with the vectorised reference;
* dtypes and mask kinds: ``DTYPES``, ``MASK_KINDS`` and ``as_mask`` (bool, 0/1 in the log-probs'
  dtype, float64 with float32 log-probs, integer 0/1);
* padding: ``PAD_FILLS`` and ``pad`` (NaN, +-inf, +-1e30 under mask 0, never read);
* value regimes: ``EXTREME_LOG_RATIOS`` (log-ratios +-25, +-100, +-800 that overflow or underflow
  ``exp`` per dtype), ``TINY_LOGP`` (probabilities e^-110 / e^-800 whose ``exp`` is 0), and
  ``log_ratios_onto`` (every float whose ``exp`` rounds exactly onto a bound, not only the one
  nearest log(bound));
* mutation: ``snapshot`` / ``mutated`` compare inputs before and after, NaN-aware.

Everything is drawn from the test's ``torch.Generator`` (``ctx.generator(salt)``), so a graded
run is replayable from its seed.
"""

from __future__ import annotations

import math
from typing import Any

import torch

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)

# What padded positions (mask 0) may hold; a solution must never read them.
PAD_FILLS = (math.nan, math.inf, -math.inf, 1e30, -1e30)

# "bool": torch.bool; "same": 0/1 in the log-probs' dtype; "float64": 0/1 float64 (with float32
# log-probs the result must stay float32); "int64": 0/1 integers.
MASK_KINDS = ("bool", "same", "float64", "int64")

# One batch of at least this many tokens per seeded run (compared with the vectorised reference).
LARGE_TOKENS = 16_384

# Valid-token log-ratios whose exp overflows (+) or underflows (-) in the dtype, or is merely huge:
# +-25 stays finite in both (libraries that clamp log-ratios at +-20 differ there), +-100
# overflows float32 only, +-800 overflows float64 too.
EXTREME_LOG_RATIOS = {F32: (25.0, -25.0, 100.0, -110.0), F64: (25.0, -25.0, 100.0, -100.0, 800.0, -800.0)}

# Log-probabilities whose probability exp(x) is exactly 0 in the dtype (exp(a) / exp(b) is 0/0 there).
TINY_LOGP = {F32: -110.0, F64: -800.0}


def as_mask(valid: torch.Tensor, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """The boolean ``valid`` [B, L] as a mask of the given kind (see ``MASK_KINDS``)."""
    if kind == "bool":
        return valid.clone()
    if kind == "same":
        return valid.to(dtype)
    if kind == "float64":
        return valid.to(F64)
    if kind == "int64":
        return valid.to(torch.int64)
    raise ValueError(f"unknown mask kind {kind!r}; expected one of {MASK_KINDS}")


def pad(x: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    """``x`` with ``fill`` at the positions where ``valid`` is False (a new tensor)."""
    return torch.where(valid, x, torch.tensor(fill, dtype=x.dtype))


def _randint(g: torch.Generator, lo: int, hi: int) -> int:
    """An int in [lo, hi], drawn from ``g``."""
    return int(torch.randint(lo, hi + 1, (), generator=g))


def sizes(g: torch.Generator, n_random: int = 6, *, max_side: int = 9, large: bool = False) -> list[tuple[int, int]]:
    """(B, L) pairs from small to large: the edges (1, 1), (1, L), (B, 1), ``n_random`` pairs drawn
    per seed (B != L and B == L both likely), and with ``large`` one batch of B * L >= LARGE_TOKENS
    tokens of a seed-drawn shape (last)."""
    out = [(1, 1), (1, _randint(g, 2, max_side)), (_randint(g, 2, max_side), 1)]
    for _ in range(n_random):
        B = _randint(g, 2, max_side)
        L = B if bool(torch.rand((), generator=g) < 0.25) else _randint(g, 2, max_side)
        out.append((B, L))
    out.sort(key=lambda s: s[0] * s[1])
    if large:
        B = _randint(g, 8, 96)
        L = -(-LARGE_TOKENS // B) + _randint(g, 0, 40)
        out.append((B, L))
    return out


def valid_mask(g: torch.Generator, B: int, L: int, *, p_valid: float = 0.75, empty_rows: int = 0,
               first_valid: bool = True) -> torch.Tensor:
    """A random bool [B, L] mask; ``first_valid`` keeps token 0 of every row, then ``empty_rows``
    rows (chosen per seed, fewer than B unless B == empty_rows) lose every token."""
    valid = torch.rand(B, L, generator=g) < p_valid
    if first_valid and L > 0:
        valid[:, 0] = True
    if empty_rows and B:
        rows = torch.randperm(B, generator=g)[:min(empty_rows, B)]
        valid[rows] = False
    return valid


def log_ratios_onto(target: float, dtype: torch.dtype, span: int = 64) -> list[float]:
    """Every ``dtype`` value x within ``span`` ulps of log(target) with exp(x) == dtype(target) in
    ``dtype`` (as torch computes it): the exact tie and the neighbouring floats whose exp rounds
    onto the bound. Sorted; empty if no float maps exactly onto it."""
    want = torch.tensor(target, dtype=dtype)
    x = torch.tensor(math.log(target), dtype=dtype)
    up = torch.tensor(math.inf, dtype=dtype)
    down = torch.tensor(-math.inf, dtype=dtype)
    xs = [x]
    a = b = x
    for _ in range(span):
        a, b = torch.nextafter(a, up), torch.nextafter(b, down)
        xs += [a, b]
    cand = torch.stack(xs)
    hit = torch.exp(cand) == want
    return sorted(float(v) for v in cand[hit])


def snapshot(inputs: dict[str, Any]) -> dict[str, Any]:
    """Clones of the tensors in ``inputs`` (other values as they are), for ``mutated``."""
    return {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def mutated(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Names of the tensors whose dtype, shape or values (NaN equal to NaN) changed."""
    out = []
    for k, b in before.items():
        a = after[k]
        if not isinstance(b, torch.Tensor):
            continue
        a = a.detach()
        if a.dtype != b.dtype or a.shape != b.shape:
            out.append(k)
        elif a.is_floating_point():
            if not bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()):
                out.append(k)
        elif not torch.equal(a, b):
            out.append(k)
    return out


def scaled_tolerance(expected: torch.Tensor, dtype: torch.dtype, *, terms: int = 1,
                     scale: float | None = None) -> tuple[float, float]:
    """(rtol, atol) for a result of ``dtype`` against a float64 expectation that sums ``terms``
    values of magnitude up to ``scale`` (default: max |expected|): float32 rounding of each term
    may add up, so the absolute tolerance grows with the magnitude and the number of terms and
    every standard stable formulation passes."""
    e = expected.detach().to(F64)
    finite = e[torch.isfinite(e)]
    mag = float(finite.abs().max()) if scale is None and finite.numel() else (scale or 0.0)
    unit = 6e-8 if dtype == F32 else 1.2e-16
    rtol = 2e-5 if dtype == F32 else 1e-9
    atol = max(1e-6 if dtype == F32 else 1e-12, 8 * unit * mag * math.sqrt(max(1, terms)))
    return rtol, atol
