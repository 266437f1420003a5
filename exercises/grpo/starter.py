"""GRPO: group-relative advantages and the PPO clipped surrogate.

Implement both functions; spec.md is the contract (formulas, stop-gradients, conventions).
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-6,
                     normalize_std: bool = True) -> Tensor:
    """Group-normalised advantages, one per response.

    Args:
        rewards: [N] float32 or float64; N = n_groups * group_size. Group g is the contiguous
            slice rewards[g * group_size : (g + 1) * group_size] (the G responses to one prompt).
        group_size: G, a positive int.
        eps: added to the POPULATION standard deviation, outside the square root.
        normalize_std: if False, return R_i - mean_g (no division).

    Returns:
        [N], same dtype as rewards: A_i = (R_i - mean_g) / (sigma_g + eps).

    Raises:
        ValueError: rewards is not 1-D, group_size <= 0, or N is not a multiple of group_size.
    """
    raise NotImplementedError("group_advantages is not implemented yet")


def grpo_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
              clip_low: float = 0.2, clip_high: float = 0.2,
              per_token_loss: bool = False) -> Tensor:
    """The clipped GRPO surrogate as a loss to minimise (the negated objective).

    Args:
        logp: [B, L] log-probs of the sampled tokens under the current policy (differentiable).
        old_logp: [B, L] log-probs under the policy that sampled them (frozen: no gradient).
        advantages: [B] one advantage per response, shared by its tokens (frozen).
        mask: [B, L] bool or 0/1 float; 0 marks padding, whose values may be NaN, inf or 1e30.
        clip_low, clip_high: the ratio is clipped to [1 - clip_low, 1 + clip_high].
        per_token_loss: False -> mean over responses of each response's token mean
            (empty responses still count in B); True -> mean over all valid tokens.

    Returns:
        A 0-dim tensor in logp's dtype, connected to logp's graph (also when mask is all 0).

    Raises:
        ValueError: when the shapes do not fit ([B, L] inputs, [B] advantages).
    """
    raise NotImplementedError("grpo_loss is not implemented yet")
