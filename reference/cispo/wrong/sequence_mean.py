"""Aggregates seq-mean-token-mean (mean per response, then over B) instead of token-mean.

expect: T1

A known-wrong CISPO solution (reference/cispo/solution.py with one plausible mistake).
"""

from __future__ import annotations

import torch

ANCHORS = ("old", "rollout")
TIS_LOW, TIS_HIGH = 0.0, 2.0  # the `tis` exercise's defaults


def _check_eps(eps_low: float, eps_high: float) -> None:
    if not eps_low >= 0:  # also rejects NaN
        raise ValueError(f"eps_low must be >= 0, got {eps_low}")
    if not eps_high > 0:
        raise ValueError(f"eps_high must be > 0, got {eps_high}")


def _check_same_2d(ref_name: str, ref: torch.Tensor, **others: torch.Tensor) -> None:
    if ref.dim() != 2:
        raise ValueError(f"{ref_name} must be 2-D [B, L], got shape {tuple(ref.shape)}")
    for name, t in others.items():
        if tuple(t.shape) != tuple(ref.shape):
            raise ValueError(f"{name} must have the shape of {ref_name} {tuple(ref.shape)}, "
                             f"got {tuple(t.shape)}")


def cispo_weights(logp: torch.Tensor, anchor_logp: torch.Tensor, mask: torch.Tensor,
                  eps_low: float = 1.0, eps_high: float = 4.0) -> torch.Tensor:
    """Clipped IS weights r_hat = sg(clip(exp(logp - anchor_logp), 1 - eps_low, 1 + eps_high)).

    Args:
        logp:        [B, L] current log-probs log pi_theta (not differentiated through).
        anchor_logp: [B, L] log-probs of the anchor policy (pi_old or pi_rollout).
        mask:        [B, L] bool or 0/1 float; padding (0) may hold NaN / inf.
    Returns:
        [B, L] detached weights in logp's dtype, 0 at padded positions.
    """
    _check_eps(eps_low, eps_high)
    _check_same_2d("logp", logp, anchor_logp=anchor_logp, mask=mask)
    valid = mask.bool()                                                    # [B, L]
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    # Neutralise padding before subtracting: NaN - NaN would poison the weight.
    log_ratio = torch.where(valid, logp.detach() - anchor_logp.detach(), zero)  # [B, L]
    ratio = torch.exp(log_ratio)              # +1000 -> inf, -1000 -> 0: clamp maps both to a bound
    r_hat = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)                     # [B, L]
    return torch.where(valid, r_hat, zero)


def tis_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Detached TIS weight clamp(exp(old - rollout), 0, 2), 0 at padding. [B, L]"""
    zero = torch.zeros((), dtype=old_logp.dtype, device=old_logp.device)
    log_rho = torch.where(valid, old_logp.detach() - rollout_logp.detach(), zero)
    return torch.where(valid, torch.exp(log_rho).clamp(TIS_LOW, TIS_HIGH), zero)


def cispo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
               mask: torch.Tensor, rollout_logp: torch.Tensor | None = None, anchor: str = "old",
               eps_low: float = 1.0, eps_high: float = 4.0, tis_enabled: bool = False) -> torch.Tensor:
    """Token-mean CISPO loss  -sum_t m * r_hat * sg(A) * logp / max(1, sum m)  (MiniMax-M1 Eq. 4).

    Args:
        logp:         [B, L] log pi_theta of the sampled tokens (the only input that gets a gradient).
        old_logp:     [B, L] log pi_old, recomputed by the trainer before the update.
        advantages:   [B] one advantage per response, broadcast over its tokens.
        mask:         [B, L] bool or 0/1 float.
        rollout_logp: [B, L] log pi_rollout from the sampler; needed by anchor "rollout" and by TIS.
        anchor:       "old" (r = pi_theta / pi_old) or "rollout" (r = pi_theta / pi_rollout).
        tis_enabled:  anchor "old" only: multiply each token's loss by sg(clamp(exp(old - rollout), 0, 2)).
    Returns:
        a scalar tensor (shape ()), graph-connected to logp even when the mask is empty.
    """
    if anchor not in ANCHORS:
        raise ValueError(f"anchor must be one of {ANCHORS}, got {anchor!r}")
    if anchor == "rollout" and rollout_logp is None:
        raise ValueError('anchor="rollout" needs rollout_logp')
    if anchor == "rollout" and tis_enabled:
        raise ValueError('anchor="rollout" with tis_enabled=True would double-count the off-policy '
                         'correction: the rollout-anchored ratio already is the IS correction')
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis_enabled=True needs rollout_logp")
    _check_eps(eps_low, eps_high)
    others = dict(old_logp=old_logp, mask=mask)
    if rollout_logp is not None:
        others["rollout_logp"] = rollout_logp
    _check_same_2d("logp", logp, **others)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages must have shape ({B},) to match logp {tuple(logp.shape)}, "
                         f"got {tuple(advantages.shape)}")

    valid = mask.bool()                                                    # [B, L]
    anchor_logp = old_logp if anchor == "old" else rollout_logp
    r_hat = cispo_weights(logp, anchor_logp, mask, eps_low, eps_high)      # [B, L], detached
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    logp_safe = torch.where(valid, logp, zero)                             # [B, L], grad 0 at padding
    coef = -r_hat * advantages.detach().to(logp.dtype)[:, None]            # [B, L]
    if tis_enabled:
        coef = coef * tis_weights(old_logp, rollout_logp, valid)
    per_token = torch.where(valid, coef * logp_safe, zero)                 # [B, L]
    n_b = valid.sum(dim=1).clamp(min=1)
    return (per_token.sum(dim=1) / n_b).mean()  # BUG: seq-mean
