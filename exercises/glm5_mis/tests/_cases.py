"""Shared case builders for the glm5_mis tier tests (loaded with ``sibling(__file__, "_cases")``)."""

from __future__ import annotations

import math

import torch

PAD_FILLS = (float("nan"), float("inf"), float("-inf"), 1e30, -1e30)
# The spec's defaults, clip_low=0.2 and clip_high=0.2. Keyword calls that leave one width out
# expect this value for it, so the other width is also passed alone (a solution that reads one
# width only when the other is given too is off).
DEFAULT_WIDTHS = {"clip_low": 0.2, "clip_high": 0.2}


def given_widths(cl: float, ch: float, omit: str | None = None) -> dict:
    """The widths as keywords, ``omit`` (whose value must be its default) left out."""
    kw = {"clip_low": cl, "clip_high": ch}
    if omit is not None:
        assert kw.pop(omit) == DEFAULT_WIDTHS[omit], (omit, cl, ch)
    return kw


def random_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, bool_mask: bool,
                pad_fill: float | None, log_ratio_scale: float = 0.3, p_valid: float = 0.7,
                empty_row: bool = False) -> dict:
    """Random inputs: logp in (-3, -0.05), log-ratios ~ N(0, scale), a random mask whose padding
    holds ``pad_fill`` in logp and rollout_logp (None: leave the random finite values there)."""
    logp = -(0.05 + 2.95 * torch.rand(B, L, generator=g, dtype=torch.float64))
    log_ratio = log_ratio_scale * torch.randn(B, L, generator=g, dtype=torch.float64)
    rollout = logp - log_ratio
    valid = torch.rand(B, L, generator=g) < p_valid
    if not bool(valid.any()):
        valid[0, 0] = True
    if empty_row and B >= 2:
        valid[B // 2] = False  # a response with no valid token: it still counts nowhere but N
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    logp, rollout, adv = logp.to(dtype), rollout.to(dtype), adv.to(dtype)
    if pad_fill is not None:
        # opposite signs in the two inputs, so that a naive difference is +inf or 2e30 (NaN stays NaN)
        logp = torch.where(valid, logp, torch.tensor(pad_fill, dtype=dtype))
        rollout = torch.where(valid, rollout, torch.tensor(-pad_fill, dtype=dtype))
    mask = valid.clone() if bool_mask else valid.to(dtype)
    return {"logp": logp, "rollout_logp": rollout, "advantages": adv, "mask": mask}


def clean_inputs(inputs: dict) -> dict:
    """Copies for feedback messages (never the tensors the submission saw)."""
    return {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def exact_ratio_value(target: float, dtype: torch.dtype) -> float:
    """The value dtype(target) as a Python float (e.g. float32(0.8) = 0.800000011920929)."""
    return float(torch.tensor(target, dtype=dtype))


def push_away(log_ratio: torch.Tensor, bounds: tuple[float, float], gap: float = 1e-4) -> torch.Tensor:
    """Log-ratios closer than ``gap`` to log(bound) moved to log(bound) + gap: random cases stay off
    the endpoints, where a 1-ulp difference between two correct exp's would flip the decision
    (the endpoints have their own tests)."""
    for bound in bounds:
        e = math.log(bound)
        log_ratio = torch.where((log_ratio - e).abs() < gap, torch.full_like(log_ratio, e + gap), log_ratio)
    return log_ratio


def regime_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, mask_kind: str,
                pad_fill: float, widths: tuple[float, float], empty_rows: int = 0,
                extreme: bool = True, adv_dtype: torch.dtype | None = None) -> dict:
    """Random inputs in every value regime at once: ordinary log-ratios (N(0, 0.3)), and with
    ``extreme`` some valid tokens with log-ratios of +-judge.cases.EXTREME_LOG_RATIOS /
    OVERFLOW_LOG_RATIOS (beyond a +-20 clamp, or overflowing exp) and some with tiny
    log-probabilities (judge.cases.TINY_LOGP: exp is 0 there, so exp(a) / exp(b) is NaN).
    Padding holds ``pad_fill``; the mask is of ``mask_kind`` (judge.cases.MASK_KINDS); the
    ``empty_rows`` rows drawn per seed have no valid token."""
    from judge import cases as jc

    valid = torch.rand(B, L, generator=g) < 0.75
    if B * L:
        valid[:, 0] = True
    if empty_rows and B:
        valid[torch.randperm(B, generator=g)[:empty_rows]] = False
    logp = -(0.05 + 2.95 * torch.rand(B, L, generator=g, dtype=torch.float64))
    log_ratio = 0.3 * torch.randn(B, L, generator=g, dtype=torch.float64)
    if extreme and B * L:
        mags = jc.EXTREME_LOG_RATIOS[dtype] + jc.OVERFLOW_LOG_RATIOS[dtype]
        ext = torch.tensor([s * m for m in mags for s in (1.0, -1.0)], dtype=torch.float64)
        pick = torch.rand(B, L, generator=g)
        which = torch.randint(0, len(ext), (B, L), generator=g)
        log_ratio = torch.where(pick < 0.1, ext[which], log_ratio)
        logp = torch.where(pick > 0.9, jc.TINY_LOGP[dtype] + logp, logp)
    log_ratio = push_away(log_ratio, (1.0 - widths[0], 1.0 + widths[1]))
    rollout = logp - log_ratio
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    if B >= 2 and float(torch.rand((), generator=g)) < 0.4:
        # a response with advantage exactly 0 still counts its tokens in the token-mean's N:
        # dropping such rows (DAPO-style filtering) changes the loss
        adv[int(torch.randint(0, B, (), generator=g))] = 0.0
    logp, rollout = jc.pad(logp.to(dtype), valid, pad_fill), jc.pad(rollout.to(dtype), valid, -pad_fill)
    return {"logp": logp, "rollout_logp": rollout, "advantages": adv.to(adv_dtype or dtype),
            "mask": jc.as_mask(valid, mask_kind)}
