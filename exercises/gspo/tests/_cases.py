"""Input builders shared by the gspo tier tests (loaded with ``sibling(__file__, "_cases")``)."""

import math

import torch

# What padded positions (mask 0) hold in the tests: never read them, never multiply them by 0.
FILLS = (math.nan, math.inf, 1e30, -math.inf, -1e30)


def random_batch(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, fill: float = math.nan,
                 old_fill: float | None = None, spread: float = 0.5, noise: float = 0.15,
                 empty_row: int | None = None, float_mask: bool = False, full: bool = False,
                 zero_adv_row: int | None = None):
    """(logp, old_logp, advantages, mask) with padding filled with ``fill``.

    Each response gets its own log-ratio offset in [-spread, spread] plus small per-token noise,
    so some sequence ratios fall inside the clip band and some outside it. ``zero_adv_row`` gets
    the advantage 0 (a group whose rewards are all equal): it adds 0 but still counts in B.
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
    if zero_adv_row is not None:
        adv[zero_adv_row] = 0.0
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


def regime_batch(g: torch.Generator, B: int, L: int, dtype: torch.dtype, k: int):
    """(logp, old_logp, advantages, mask, kwargs) for case number ``k`` of a run: every mask kind
    and padding fill in turn, empty rows, the default clip_eps omitted every third case, else a
    width drawn per seed (0, >= 1 included: used as given); per-response mean log-ratios that are
    ordinary, +-12 (beyond verl's clamp at 10; with A < 0 the loss is -s A = |A| e^12) or, for
    A > 0 only, overflowing (clipped: gradient 0, never NaN); tiny log-probabilities (e^-110 /
    e^-800); float64 advantages with float32 log-probs and float32 advantages with float64 ones;
    one left-padded response (position 0 padding, a later token valid) whenever L >= 2; advantages
    scaled by 1e3 in every fourth case (no clamp of A)."""
    from judge import cases as jc

    f64 = torch.float64
    valid = torch.rand(B, L, generator=g) < 0.7
    if B * L:
        valid[:, 0] = True
    if B >= 2 and k % 2 == 1:
        valid[int(torch.randint(0, B, (), generator=g))] = False
    if B and L >= 2:
        # the first non-empty response is left-padded: its position 0 is padding, its last token
        # valid (an emptiness test that reads mask[:, 0], i.e. assumes right padding, drops it)
        r = int(valid.any(-1).to(torch.int8).argmax())
        valid[r, 0], valid[r, -1] = False, True
    adv = torch.randn(B, generator=g, dtype=f64)
    if k % 4 == 2:
        adv = adv * 1e3     # advantages far from unit scale are allowed: no clamp of A (e.g. to +-50)
    offset = (torch.rand(B, 1, generator=g, dtype=f64) * 2.0 - 1.0) * 0.5
    pick = torch.rand(B, 1, generator=g)
    sign = torch.where(torch.rand(B, 1, generator=g) < 0.5, -1.0, 1.0).to(f64)
    offset = torch.where(pick < 0.15, 12.0 * sign, offset)
    over = jc.OVERFLOW_LOG_RATIOS[dtype][0] + 5.0
    offset = torch.where((pick > 0.9) & (adv[:, None] > 0), torch.full_like(offset, over), offset)
    logp = -(torch.rand(B, L, generator=g, dtype=f64) * 3.0 + 0.05)
    logp = torch.where(torch.rand(B, L, generator=g) < 0.1, logp + jc.TINY_LOGP[dtype], logp)
    old = logp - offset - torch.randn(B, L, generator=g, dtype=f64) * 0.15
    if k % 3 == 0:
        kwargs, eps = {}, 0.2
    else:
        widths = (0.0, 0.05, 0.2, 0.3, 1.0, 1.5)
        eps = widths[int(torch.randint(0, len(widths), (), generator=g))]
        kwargs = {"clip_eps": eps}
    fill = FILLS[k % len(FILLS)]
    logp, old = jc.pad(logp, valid, fill), jc.pad(old, valid, -fill)
    # keep every response's s off the clip bounds (a 1-ulp difference would flip the branch)
    n = valid.sum(-1).clamp(min=1)
    log_s = torch.where(valid, logp - old, 0.0).sum(-1) / n
    for bound in (1 - eps, 1 + eps):
        if bound > 0:
            near = (log_s - math.log(bound)).abs() < 1e-3
            logp = torch.where(near[:, None] & valid, logp + 0.01, logp)
    mask = jc.as_mask(valid, jc.MASK_KINDS[k % len(jc.MASK_KINDS)])
    # mixed dtypes both ways: float64 advantages with float32 logp, float32 advantages with float64
    # logp (computing in the advantages' dtype, or in float32 when either input is, loses float64)
    if dtype == torch.float32:
        adv_dtype = f64 if k % 3 != 2 else dtype
    else:
        adv_dtype = torch.float32 if k % 3 != 0 else dtype
    return logp.to(dtype), old.to(dtype), adv.to(adv_dtype), mask, kwargs
