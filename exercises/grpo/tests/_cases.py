"""Random case generators for the grpo tier tests (small to large, fresh each seeded run)."""

from __future__ import annotations

import math

import torch

from judge.testing import backward_losses as backward_all  # one backward for many losses
from judge.testing import without_defaults

PAD_FILLS = (float("nan"), float("inf"), float("-inf"), 1e30)
# (clip_low, clip_high) of loss_cases, case j taking CLIPS[j % 5] (5 is prime to the 2 and 3 of
# the mask encoding and the aggregation, so each band meets both of each). Two bands keep one
# width at its default (0.2): the keyword calls leave it out, so each width is also passed alone
# (a solution that reads one width only when the other is given too, or that derives a missing
# one from the other, is off there); both defaults together in (0.2, 0.2).
CLIPS = ((0.2, 0.2), (0.2, 0.28), (0.1, 0.3), (0.3, 0.1), (0.35, 0.2))
# grpo_loss's defaults as spec.md's signature states them: a keyword call of loss_cases omits
# every parameter at its default, and the expectation is computed with them written out.
LOSS_DEFAULTS = {"clip_low": 0.2, "clip_high": 0.2, "per_token_loss": False}
EPS_CHOICES = (None, 0.1, 0.5, 1e-3)          # None: the default eps=1e-6


def advantage_cases(g: torch.Generator, limit: int | None = None, start: int = 0):
    """Yield (rewards, group_size, kwargs) from small to large (shapes number ``start`` to
    ``limit``; case k is drawn as in the full sweep, its dtype, kind and keywords by its number).

    Rewards are binary (constant groups happen often), halves, or continuous; float32 cases
    only use values whose group means are exact, so a constant group must give exactly 0.
    """
    shapes = [(1, 1), (2, 1), (1, 2), (2, 2), (3, 1), (1, 3), (2, 3), (3, 2), (1, 4), (2, 4),
              (3, 4), (2, 8), (4, 4), (3, 8), (5, 6)]   # (n_groups, G)
    for k, (n_groups, G) in enumerate(shapes[:limit]):
        if k < start:
            continue
        N = n_groups * G
        kind = k % 3
        dtype = torch.float64 if k % 2 == 0 else torch.float32
        if kind == 0:
            r = (torch.rand(N, generator=g, dtype=torch.float64) < 0.5).to(torch.float64)
        elif kind == 1:
            r = torch.randint(0, 3, (N,), generator=g).to(torch.float64) * 0.5
        else:
            r = torch.randn(N, generator=g, dtype=torch.float64) * 2.0 + 0.3
            dtype = torch.float64
        kwargs = {}
        eps = EPS_CHOICES[(k // 2) % len(EPS_CHOICES)]
        if eps is not None:
            kwargs["eps"] = eps
        if k % 4 == 3:
            kwargs["normalize_std"] = False
        yield r.to(dtype), G, kwargs


def loss_cases(g: torch.Generator, limit: int | None = None, start: int = 0):
    """Yield (logp, old_logp, advantages, mask, kwargs) from small to large (shapes number
    ``start`` to ``limit``; each case drawn as in the full sweep, its dtype, clips, mask, fill and
    aggregation by its number).

    Covers B != L and B == L, float32 and float64, bool and float masks, both aggregations,
    asymmetric clips, empty responses, zero advantages, and padding filled with NaN / ±inf /
    1e30. Ratios are kept at least 1e-3 away from the clip bounds (no ties at the bounds).
    ``kwargs`` leaves out every parameter equal to its default (``LOSS_DEFAULTS``): each width
    alone, each with or without per_token_loss, per_token_loss=True alone.
    """
    shapes = [(1, 1), (1, 3), (2, 2), (3, 1), (2, 5), (3, 3), (4, 2), (3, 7), (5, 5), (4, 8),
              (6, 3), (8, 8)]
    for k, (B, L) in enumerate(shapes[:limit]):
        if k < start:
            continue
        for dtype in (torch.float64, torch.float32):
            j = 2 * k + (dtype == torch.float32)
            clip_low, clip_high = CLIPS[j % len(CLIPS)]
            logp = -3.0 * torch.rand(B, L, generator=g, dtype=torch.float64) - 0.05
            delta = 0.35 * torch.randn(B, L, generator=g, dtype=torch.float64)
            for bound in (math.log(1 - clip_low), math.log(1 + clip_high)):
                near = (delta - bound).abs() < 1e-3
                delta = torch.where(near, delta + 0.01, delta)
            old = logp - delta
            adv = torch.randn(B, generator=g, dtype=torch.float64)
            if B >= 3 and j % 3 == 0:
                adv[B // 2] = 0.0
            mask = torch.rand(B, L, generator=g) < 0.75
            mask[:, 0] |= L == 1                       # keep most single-token rows valid
            if B >= 3 and j % 2 == 0:
                mask[1] = False                        # an empty response
            fill = PAD_FILLS[j % len(PAD_FILLS)]
            logp = torch.where(mask, logp, torch.full_like(logp, fill))
            old = torch.where(mask, old, torch.full_like(old, PAD_FILLS[(j + 1) % len(PAD_FILLS)]))
            m = mask if j % 2 == 0 else mask.to(dtype)
            kwargs = {"clip_low": clip_low, "clip_high": clip_high, "per_token_loss": j % 3 == 1}
            kwargs = without_defaults(kwargs, LOSS_DEFAULTS)  # the defaults omitted
            yield logp.to(dtype), old.to(dtype), adv.to(dtype), m, kwargs


def regime_loss_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, k: int) -> tuple:
    """(logp, old_logp, advantages, mask, kwargs) of shape [B, L] for case number ``k`` of a run:
    every mask kind and padding fill in turn, empty rows, the defaults omitted every third case,
    clip widths drawn per seed (sometimes 0, sometimes >= 1: they are used as given), ordinary
    log-ratios mixed with +-25 (beyond verl's +-20 clamp, and ratios > 3 where verl's dual clip
    would bind) and, for positive advantages only, log-ratios whose exp overflows (the clipped
    term is chosen: loss -(1 + clip_high) A, gradient 0, never NaN); float64 advantages with
    float32 logp and float32 advantages with float64 logp in some cases; advantages scaled by 1e3
    in every fourth case (no clamp of A)."""
    from judge import cases as jc

    valid = torch.rand(B, L, generator=g) < 0.75
    if B * L:
        valid[:, 0] = True
    if B >= 2 and k % 2 == 1:
        valid[int(torch.randint(0, B, (), generator=g))] = False
    logp = -3.0 * torch.rand(B, L, generator=g, dtype=torch.float64) - 0.05
    delta = 0.35 * torch.randn(B, L, generator=g, dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    if k % 4 == 2:
        adv = adv * 1e3     # advantages far from unit scale are allowed: no clamp of A (e.g. to +-50)
    pick = torch.rand(B, L, generator=g)
    sign = torch.where(torch.rand(B, L, generator=g) < 0.5, -1.0, 1.0).to(torch.float64)
    delta = torch.where(pick < 0.08, 25.0 * sign, delta)
    over = jc.OVERFLOW_LOG_RATIOS[dtype][0]
    delta = torch.where((pick > 0.95) & (adv[:, None] > 0), torch.full_like(delta, over), delta)
    logp = torch.where(pick > 0.9, logp + jc.TINY_LOGP[dtype], logp)
    if k % 3 == 0:
        kwargs = {}
        clip_low = clip_high = 0.2
    else:
        choices = (0.0, 0.1, 0.2, 0.28, 0.5, 1.0, 1.5)
        clip_low = choices[int(torch.randint(0, len(choices), (), generator=g))]
        clip_high = choices[int(torch.randint(0, len(choices), (), generator=g))]
        kwargs = {"clip_low": clip_low, "clip_high": clip_high}
    if k % 3 != 0 or k % 2:
        kwargs["per_token_loss"] = bool(k % 2)
    for bound in (1 - clip_low, 1 + clip_high):
        if bound > 0:
            e = math.log(bound)
            delta = torch.where((delta - e).abs() < 1e-3, delta + 0.01, delta)
    old = logp - delta
    fill = jc.PADS[k % len(jc.PADS)]
    logp, old = jc.pad(logp, valid, fill), jc.pad(old, valid, -fill)
    mask = jc.as_mask(valid, jc.MASK_KINDS[k % len(jc.MASK_KINDS)])
    # mixed dtypes both ways: float64 advantages with float32 logp, float32 advantages with float64
    # logp (computing in the advantages' dtype, or in float32 when either input is, loses float64)
    if dtype == torch.float32:
        adv_dtype = torch.float64 if k % 3 != 0 else dtype
    else:
        adv_dtype = torch.float32 if k % 3 != 0 else dtype
    return logp.to(dtype), old.to(dtype), adv.to(adv_dtype), mask, kwargs
