"""CORRECT: the reference's computation with the strict convention at an exact PPO clip tie: torch.where picks the clipped branch (gradient 0) at r == 1 + eps_high for A > 0 and r == 1 - eps_low for A < 0 (spec: either gradient is accepted there)."""
from __future__ import annotations

import math

import torch


def _check_bounds(low: float, high: float) -> None:
    # 0 <= low <= high with high finite and > 0 (slime's --tis-clip-low / --tis-clip).
    if not (math.isfinite(high) and high > 0.0):
        raise ValueError(f"high must be finite and > 0, got {high!r}")
    if not (0.0 <= low <= high):
        raise ValueError(f"need 0 <= low <= high, got low={low!r}, high={high!r}")


def _check_shapes(mask: torch.Tensor, named: dict[str, torch.Tensor],
                  advantages: torch.Tensor | None = None) -> None:
    shapes = {k: tuple(v.shape) for k, v in named.items()}
    shapes["mask"] = tuple(mask.shape)
    if mask.dim() != 2 or len(set(shapes.values())) != 1:
        raise ValueError(f"expected 2-D inputs sharing one [B, L] shape, got {shapes}")
    if advantages is not None and tuple(advantages.shape) != (mask.shape[0],):
        raise ValueError(f"advantages must have shape [B] = ({mask.shape[0]},), "
                         f"got {tuple(advantages.shape)}")


def _icepop_weight(old_logp, rollout_logp, valid, low, high):
    """sg(rho * 1[low <= rho <= high]) at valid tokens, 0 elsewhere: [B, L] in old_logp's dtype."""
    zero = torch.zeros((), dtype=old_logp.dtype, device=old_logp.device)
    log_rho = torch.where(valid, old_logp.detach() - rollout_logp.detach(), zero)  # [B, L]
    rho = torch.exp(log_rho)                                    # p0 / q; may be inf or 0
    # Python-float bounds are cast to rho's dtype by torch: the comparison is native-dtype.
    keep = valid & (rho >= low) & (rho <= high)                 # closed interval
    return torch.where(keep, rho, zero)                         # select, never rho * keep


def icepop_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor,
                   low: float = 0.5, high: float = 2.0) -> torch.Tensor:
    """Detached IcePop weights rho * 1[low <= rho <= high], rho = exp(old_logp - rollout_logp).

    old_logp, rollout_logp: [B, L] float32/float64; mask: [B, L] bool or 0/1.
    Returns [B, L] in old_logp's dtype, 0 at padding and outside the band.
    """
    _check_bounds(low, high)
    _check_shapes(mask, {"old_logp": old_logp, "rollout_logp": rollout_logp})
    return _icepop_weight(old_logp, rollout_logp, mask != 0, low, high)


def icepop_ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, rollout_logp: torch.Tensor,
                    advantages: torch.Tensor, mask: torch.Tensor, eps_low: float = 0.2,
                    eps_high: float = 0.2, low: float = 0.5, high: float = 2.0,
                    per_token_loss: bool = True) -> torch.Tensor:
    """PPO-clip loss with each token's loss multiplied by its detached IcePop weight; shape ().

    logp: [B, L] (receives the gradient); old_logp, rollout_logp: [B, L]; advantages: [B];
    mask: [B, L]. Rejected tokens (weight 0) stay in the denominator. per_token_loss=True:
    token-mean over all valid tokens; False: seq-mean-token-mean, empty responses counted in B.
    An empty mask gives a zero still connected to logp's graph.
    """
    _check_bounds(low, high)
    _check_shapes(mask, {"logp": logp, "old_logp": old_logp, "rollout_logp": rollout_logp},
                  advantages)
    valid = mask != 0                                                     # [B, L] bool
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    w = _icepop_weight(old_logp, rollout_logp, valid, low, high).to(logp.dtype)  # [B, L]

    adv = advantages.detach().to(logp.dtype)[:, None]                      # [B, 1], sg(A)
    log_r = torch.where(valid, logp - old_logp.detach(), zero)             # [B, L]
    # A > 0 with r above 1 + eps_high is clipped (gradient 0). Its ratio may overflow to inf, and
    # exp's backward would give 0 * inf = NaN there: route those tokens' gradient to nothing.
    with torch.no_grad():
        cut = (adv > 0) & (torch.exp(log_r) > 1.0 + eps_high)              # [B, L]
    r = torch.exp(torch.where(cut, log_r.detach(), log_r))                 # PPO ratio
    surr1 = r * adv
    surr2 = torch.clamp(r, 1.0 - eps_low, 1.0 + eps_high) * adv
    # strict convention at an exact clip tie: the clipped branch (gradient 0) wins
    unclipped = torch.where(adv > 0, r < 1.0 + eps_high, r > 1.0 - eps_low)
    pg = -torch.where(unclipped, surr1, surr2.detach())
    per_token = torch.where(valid, w * pg, zero)                           # w multiplies the loss

    if per_token_loss:
        return per_token.sum() / valid.sum().clamp(min=1).to(logp.dtype)
    n_i = valid.sum(dim=1).clamp(min=1).to(logp.dtype)                     # [B]
    return (per_token.sum(dim=1) / n_i).sum() / max(1, logp.shape[0])
