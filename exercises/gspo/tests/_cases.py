"""Input builders shared by the gspo tier tests (loaded with ``sibling(__file__, "_cases")``)."""

import math

import torch

# What padded positions (mask 0) hold in the tests: never read them, never multiply them by 0.
FILLS = (math.nan, math.inf, 1e30, -math.inf, -1e30)


def random_batch(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, fill: float = math.nan,
                 old_fill: float | None = None, spread: float = 0.5, noise: float = 0.15,
                 empty_row: int | None = None, float_mask: bool = False, full: bool = False):
    """(logp, old_logp, advantages, mask) with padding filled with ``fill``.

    Each response gets its own log-ratio offset in [-spread, spread] plus small per-token noise,
    so some sequence ratios fall inside the clip band and some outside it.
    """
    f64 = torch.float64
    logp = -(torch.rand(B, L, generator=g, dtype=f64) * 3.0 + 0.05)
    offset = (torch.rand(B, 1, generator=g, dtype=f64) * 2.0 - 1.0) * spread
    jitter = torch.randn(B, L, generator=g, dtype=f64) * noise
    old = logp - offset - jitter
    mask = torch.rand(B, L, generator=g) < 0.7
    if L > 0:
        mask[:, 0] = True
    if full:
        mask[:] = True
    if empty_row is not None:
        mask[empty_row] = False
    adv = torch.randn(B, generator=g, dtype=f64)
    logp = logp.masked_fill(~mask, fill)
    old = old.masked_fill(~mask, fill if old_fill is None else old_fill)
    m = mask.to(dtype) if float_mask else mask
    return logp.to(dtype), old.to(dtype), adv.to(dtype), m


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Elementwise equal, NaN equal to NaN (for checking that inputs were not mutated)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())
