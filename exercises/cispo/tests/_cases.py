"""Shared input builders for the cispo tier tests (loaded with ``sibling(__file__, "_cases")``)."""

from __future__ import annotations

import math

import torch

from judge import cases as shared
from judge.testing import without_defaults

FILLS = [math.nan, math.inf, -math.inf, 1e30]
# Bands (eps_low, eps_high). Two of them keep one width at its default (eps_low = 1, eps_high = 4):
# the keyword calls of test_t1_oracle leave such a width out, so each width is also passed alone
# (a solution that reads one width only when the other is given too is off); the positional
# calls pass them as the ints 1 and 4. Both defaults together: test_default_band_caps_weights_at_5.
EPS = [(0.2, 0.2), (0.2, 0.28), (1.0, 0.5), (0.5, 4.0)]
DEFAULT_EPS = {"eps_low": 1.0, "eps_high": 4.0}


def given_widths(eps_low: float, eps_high: float) -> dict:
    """The widths as keywords, one equal to its default left out."""
    return without_defaults({"eps_low": eps_low, "eps_high": eps_high}, DEFAULT_EPS)
DTYPES = [torch.float64, torch.float32]


def log_ratios(g: torch.Generator, B: int, L: int) -> torch.Tensor:
    """Log-ratios around 0 with a heavy tail, so both bounds of every band in EPS are crossed."""
    x = 0.35 * torch.randn(B, L, generator=g, dtype=torch.float64)
    big = torch.rand(B, L, generator=g, dtype=torch.float64) < 0.3
    tail = 2.5 * torch.randn(B, L, generator=g, dtype=torch.float64)
    return torch.where(big, tail, x)


def random_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, fill: float,
                mask_kind: str, empty_row: bool = False, empty_at: int | None = None) -> dict:
    """A random batch: log-probs, advantages, a mask (``mask_kind``, one of judge.cases.MASK_KINDS)
    with padding filled with ``fill``; ``empty_row``: the last row (when B > 1; row ``empty_at``
    instead when given, a middle one, so a row loop that stops at the first empty response drops
    the rows after it) has no valid token;
    otherwise, when B >= 3, row 0 (which always has a valid token) has an advantage of exactly 0
    (a GRPO group with equal rewards): its tokens still count in N, so a normaliser that skips
    zero-advantage responses is off."""
    old = -3.0 * torch.rand(B, L, generator=g, dtype=torch.float64) - 0.05
    logp = old + log_ratios(g, B, L)
    rollout = old - log_ratios(g, B, L)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    if B * L == 1:
        mask = torch.ones(B, L, dtype=torch.bool)
    else:
        mask = torch.rand(B, L, generator=g) < 0.7
        if empty_row and B > 1:
            mask[B - 1 if empty_at is None else empty_at] = False
        mask[0, 0] = True  # at least one valid token
    out = {}
    for name, x in (("logp", logp), ("old_logp", old), ("rollout_logp", rollout)):
        out[name] = torch.where(mask, x, torch.full_like(x, fill)).to(dtype)
    if B >= 3 and not empty_row:
        adv[0] = 0.0
    out["advantages"] = adv.to(dtype)
    out["mask"] = shared.as_mask(mask, mask_kind)
    return out


def cases(ctx, salt: int):
    """Yield (label, case, eps_low, eps_high) from small to large, float64 and float32 each.

    Shapes: the corners 1 x 1, 1 x L, B x 1 and three sizes drawn per seed (sides up to 12,
    judge.cases.shapes), and a square B = L (a broadcast of the advantages over the wrong axis
    raises nowhere else). Per dtype, every band of EPS, every fill of FILLS and every mask
    encoding (bool, 0/1 float32 / float64 / int64) appears, and every other case has an empty row.
    Half the cases are non-contiguous views (``judge.cases.strided``), in mixed layouts or every [B, L] input
    column-major, each in both dtypes.
    """
    g = ctx.generator(salt)
    square = int(torch.randint(2, 9, (), generator=g))
    shapes = sorted(shared.shapes(g, large=False) + [(square, square)], key=lambda s: (s[0] * s[1], s))
    i = 0
    for B, L in shapes:
        for dtype in DTYPES:
            j = i // 2  # the same schedule for both dtypes, shifted so that they differ per shape
            eps_low, eps_high = EPS[(j + i) % len(EPS)]
            fill = FILLS[(j + 2 * i) % len(FILLS)]
            kind = shared.MASK_KINDS[(j + 3 * i) % len(shared.MASK_KINDS)]
            # of the two dtypes of a shape with an empty row, float64 has it in the middle (B >= 3)
            case = random_case(g, B, L, dtype, fill, kind, empty_row=(j % 2 == 1),
                               empty_at=B // 2 if i % 2 == 0 and B >= 3 else None)
            layout = (i + j) % 4  # 1: mixed non-contiguous views, 3: every [B, L] input column-major
            if layout in (1, 3):
                case = shared.strided(case, major=("logp", "rollout_logp"), column_major=layout == 3)
            yield (f"B={B}, L={L}, {str(dtype).replace('torch.', '')}, {kind} mask, padding {fill}"
                   + ("" if layout not in (1, 3) else ", column-major inputs" if layout == 3
                      else ", non-contiguous inputs"), case, eps_low, eps_high)
            i += 1
