"""Shared input builders for the cispo tier tests (loaded with ``sibling(__file__, "_cases")``)."""

from __future__ import annotations

import math

import torch

# (B, L) from small to large; B != L and B == L both appear.
SHAPES = [(1, 1), (1, 3), (2, 2), (3, 1), (2, 5), (4, 4), (5, 3), (6, 8), (8, 8)]
FILLS = [math.nan, math.inf, -math.inf, 1e30]
EPS = [(0.2, 0.2), (0.2, 0.28), (1.0, 4.0), (0.5, 1.0)]
DTYPES = [torch.float64, torch.float32]


def log_ratios(g: torch.Generator, B: int, L: int) -> torch.Tensor:
    """Log-ratios around 0 with a heavy tail, so both bounds of every band in EPS are crossed."""
    x = 0.35 * torch.randn(B, L, generator=g, dtype=torch.float64)
    big = torch.rand(B, L, generator=g, dtype=torch.float64) < 0.3
    tail = 2.5 * torch.randn(B, L, generator=g, dtype=torch.float64)
    return torch.where(big, tail, x)


def random_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, fill: float,
                bool_mask: bool) -> dict:
    """A random batch: log-probs, advantages, a mask with padding filled with ``fill``."""
    old = -3.0 * torch.rand(B, L, generator=g, dtype=torch.float64) - 0.05
    logp = old + log_ratios(g, B, L)
    rollout = old - log_ratios(g, B, L)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    if B * L == 1:
        mask = torch.ones(B, L, dtype=torch.bool)
    else:
        mask = torch.rand(B, L, generator=g) < 0.7
        mask[0, 0] = True  # at least one valid token
    out = {}
    for name, x in (("logp", logp), ("old_logp", old), ("rollout_logp", rollout)):
        out[name] = torch.where(mask, x, torch.full_like(x, fill)).to(dtype)
    out["advantages"] = adv.to(dtype)
    out["mask"] = mask if bool_mask else mask.to(dtype)
    return out


def cases(ctx, salt: int):
    """Yield (label, case, eps_low, eps_high) from small to large, float64 and float32 each."""
    g = ctx.generator(salt)
    i = 0
    for B, L in SHAPES:
        for dtype in DTYPES:
            fill = FILLS[(i + i // 3) % len(FILLS)]
            eps_low, eps_high = EPS[(i + i // 2) % len(EPS)]
            case = random_case(g, B, L, dtype, fill, bool_mask=(i % 2 == 0))
            yield f"B={B}, L={L}, {str(dtype).replace('torch.', '')}", case, eps_low, eps_high
            i += 1
