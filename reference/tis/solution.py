"""Truncated importance sampling (TIS) on a PPO-clip loss (reference solution).

Yao et al., "On the Rollout-Training Mismatch in Modern RL Systems" (NeurIPS 2025 workshop;
https://openreview.net/forum?id=8MHqvb4lK9), as implemented by slime's ``vanilla_tis_function``
(slime/backends/megatron_utils/loss.py).

The rollout engine samples with q = pi_rollout, the trainer recomputes p0 = pi_old and
optimises pi_theta. Two different ratios appear:

    r_it   = exp(log pi_theta,it - sg(log pi_old,it))        PPO update ratio (carries the gradient)
    rho_it = exp(log pi_old,it - log pi_rollout,it)          behaviour correction (p0 / q)

TIS truncates the behaviour correction and multiplies it, detached, into the per-token PPO loss:

    w_it  = sg( clamp(rho_it, L, U) )                        inclusive clamp; rho = +inf -> U, 0 -> L
    l_it  = -min( r_it A_i, clip(r_it, 1 - eps_low, 1 + eps_high) A_i )
    loss  = sum_it m_it w_it l_it / max(1, sum_it m_it)                   per_token_loss=True
          = (1/B) sum_i [ sum_t m_it w_it l_it / max(1, n_i) ]            per_token_loss=False

The weight multiplies the loss (not the ratio inside min/clip), so d loss / d logp is w times the
plain PPO gradient. The denominator counts the original valid tokens: nothing is renormalised.

Padding (mask 0) may hold NaN/inf/1e30; every input is replaced with torch.where before any
subtraction or exp, so padded positions contribute 0 and receive exactly 0 gradient.
"""

from __future__ import annotations

import math

import torch


def _check_bounds(low: float, high: float, names: tuple[str, str]) -> None:
    # 0 <= L <= U with U finite and > 0 (slime's --tis-clip-low / --tis-clip).
    if not (math.isfinite(high) and high > 0.0):
        raise ValueError(f"{names[1]} must be finite and > 0, got {high!r}")
    if not (0.0 <= low <= high):
        raise ValueError(f"need 0 <= {names[0]} <= {names[1]}, got {names[0]}={low!r}, {names[1]}={high!r}")


def _check_shapes(mask: torch.Tensor, named: dict[str, torch.Tensor],
                  advantages: torch.Tensor | None = None) -> None:
    shapes = {k: tuple(v.shape) for k, v in named.items()}
    shapes["mask"] = tuple(mask.shape)
    if mask.dim() != 2 or len(set(shapes.values())) != 1:
        raise ValueError(f"expected 2-D inputs sharing one [B, L] shape, got {shapes}")
    if advantages is not None and tuple(advantages.shape) != (mask.shape[0],):
        raise ValueError(f"advantages must have shape [B] = ({mask.shape[0]},), "
                         f"got {tuple(advantages.shape)}")


def _tis_weight(old_logp, rollout_logp, valid, low, high):
    """sg(clamp(rho, low, high)) at valid tokens, 0 at padding: [B, L] in old_logp's dtype."""
    zero = torch.zeros((), dtype=old_logp.dtype, device=old_logp.device)
    log_rho = torch.where(valid, old_logp.detach() - rollout_logp.detach(), zero)  # [B, L]
    rho = torch.exp(log_rho)                                   # p0 / q; may be inf or 0
    w = torch.clamp(rho, min=low, max=high)                    # inf -> high, 0 -> low
    return torch.where(valid, w, zero)                         # padding -> 0


def tis_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor,
                clip_low: float = 0.0, clip_high: float = 2.0) -> torch.Tensor:
    """Detached TIS weights clamp(exp(old_logp - rollout_logp), clip_low, clip_high).

    old_logp, rollout_logp: [B, L] float32/float64; mask: [B, L] bool or 0/1.
    Returns [B, L] in old_logp's dtype, 0 at padding.
    """
    _check_bounds(clip_low, clip_high, ("clip_low", "clip_high"))
    _check_shapes(mask, {"old_logp": old_logp, "rollout_logp": rollout_logp})
    return _tis_weight(old_logp, rollout_logp, mask != 0, clip_low, clip_high)


def tis_ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, rollout_logp: torch.Tensor,
                 advantages: torch.Tensor, mask: torch.Tensor, eps_low: float = 0.2,
                 eps_high: float = 0.2, tis_low: float = 0.0, tis_high: float = 2.0,
                 per_token_loss: bool = True) -> torch.Tensor:
    """PPO-clip loss with each token's loss multiplied by its detached TIS weight; shape ().

    logp: [B, L] (receives the gradient); old_logp, rollout_logp: [B, L]; advantages: [B];
    mask: [B, L]. per_token_loss=True: token-mean over all valid tokens; False:
    seq-mean-token-mean, empty responses counted in B. An empty mask gives a zero still
    connected to logp's graph.
    """
    _check_bounds(tis_low, tis_high, ("tis_low", "tis_high"))
    _check_shapes(mask, {"logp": logp, "old_logp": old_logp, "rollout_logp": rollout_logp},
                  advantages)
    valid = mask != 0                                                     # [B, L] bool
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    w = _tis_weight(old_logp, rollout_logp, valid, tis_low, tis_high)     # [B, L], the log-probs' dtype

    adv = advantages.detach().to(logp.dtype)[:, None]                      # [B, 1], sg(A)
    log_r = torch.where(valid, logp - old_logp.detach(), zero)             # [B, L]
    # Which term the min picks, decided without gradient. Where it picks the clipped term the
    # token's loss is a constant and its ratio stays out of the graph: exp's backward at an
    # overflowed ratio (inf) would send 0 * inf = NaN to logp even with a zero upstream gradient.
    r_d = torch.exp(log_r.detach())                                        # PPO ratio, may be inf
    clipped_d = torch.clamp(r_d, 1.0 - eps_low, 1.0 + eps_high) * adv      # clip(r) A
    picks_clipped = ~(r_d * adv <= clipped_d)                              # NaN (inf * 0): clipped
    r = torch.exp(torch.where(picks_clipped, zero, log_r))                 # r where the min is r A
    pg = torch.where(picks_clipped, -clipped_d, -r * adv)                  # -min(r A, clip(r) A)
    per_token = torch.where(valid, w * pg, zero)                           # w multiplies the loss

    if per_token_loss:
        return per_token.sum() / valid.sum().clamp(min=1).to(logp.dtype)
    n_i = valid.sum(dim=1).clamp(min=1).to(logp.dtype)                     # [B]
    return (per_token.sum(dim=1) / n_i).sum() / max(1, logp.shape[0])
