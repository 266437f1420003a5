"""IcePop (masked importance sampling, inclusive band) on a PPO-clip loss: your implementation.

Read spec.md for the whole contract. Shapes: B responses, L tokens per response (padded).
"""

from __future__ import annotations

import torch


def icepop_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor,
                   low: float = 0.5, high: float = 2.0) -> torch.Tensor:
    """Detached IcePop weights w = rho * 1[low <= rho <= high], rho = exp(old_logp - rollout_logp).

    Args:
        old_logp: [B, L] float32/float64, the trainer's recomputed log-probs log p0 (frozen).
        rollout_logp: [B, L], the rollout engine's log-probs log q (frozen).
        mask: [B, L] bool or 0/1 float; 0 marks padding (which may hold NaN, inf or 1e30).
        low, high: the closed band [low, high]; need 0 <= low <= high, high finite and > 0.

    Returns:
        [B, L] tensor in old_logp's dtype, detached: rho inside the band (endpoints included),
        0 outside it and 0 at padded positions.

    Raises:
        ValueError: mismatched or non-2-D shapes, invalid bounds.
    """
    raise NotImplementedError("icepop_weights is not implemented yet")


def icepop_ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, rollout_logp: torch.Tensor,
                    advantages: torch.Tensor, mask: torch.Tensor, eps_low: float = 0.2,
                    eps_high: float = 0.2, low: float = 0.5, high: float = 2.0,
                    per_token_loss: bool = True) -> torch.Tensor:
    """PPO-clip loss whose per-token terms are multiplied by the detached IcePop weight.

    Args:
        logp: [B, L], current log-probs log pi_theta (the only input that receives gradient).
        old_logp: [B, L], log p0 (frozen; the PPO ratio's denominator and rho's numerator).
        rollout_logp: [B, L], log q (frozen).
        advantages: [B], one advantage per response, broadcast over its tokens (frozen).
        mask: [B, L] bool or 0/1 float.
        eps_low, eps_high: PPO clip widths: clip(r, 1 - eps_low, 1 + eps_high) (not validated).
        low, high: the IcePop band (validated like icepop_weights).
        per_token_loss: True: token-mean over all valid tokens (rejected ones included); False:
            seq-mean-token-mean with empty responses still counted in B.

    Returns:
        A scalar tensor of shape () in logp's dtype, connected to logp's graph (also when the
        mask is empty: then it is a differentiable zero).

    Raises:
        ValueError: mismatched shapes (advantages must be [B], not [B, 1]), invalid bounds.
    """
    raise NotImplementedError("icepop_ppo_loss is not implemented yet")
