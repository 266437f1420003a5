"""GLM-5 double-sided masked importance sampling: your implementation.

Read spec.md for the full contract. Both functions take
    logp          [B, L] float32/float64  current policy log-probs of the sampled tokens
    rollout_logp  [B, L] same dtype       log-probs recorded by the (older) rollout policy
    mask          [B, L] bool or 0/1      1 for real response tokens, 0 for padding
Padding may hold NaN, inf or 1e30. Never modify the inputs.
"""

import torch


def masked_is_weights(logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor,
                      clip_low: float = 0.2, clip_high: float = 0.2) -> torch.Tensor:
    """Detached weights w = r * 1(1 - clip_low < r < 1 + clip_high), r = exp(logp - rollout_logp).

    Returns a [B, L] tensor in logp's dtype with no gradient: r where the ratio lies STRICTLY
    inside the interval, 0 at padding, at both endpoints and outside.
    Raises ValueError on mismatched or non-2-D shapes, or unless 0 < clip_low < 1 and clip_high
    is finite and > 0.
    """
    raise NotImplementedError("masked_is_weights is not implemented yet")


def offpolicy_loss(logp: torch.Tensor, rollout_logp: torch.Tensor, advantages: torch.Tensor,
                   mask: torch.Tensor, clip_low: float = 0.2, clip_high: float = 0.2) -> torch.Tensor:
    """L = -sum_{b,t} m w sg(A_b) logp / max(1, sum m), with w from masked_is_weights.

    advantages: [B], one per response, broadcast over its tokens (shape [B, 1] is an error).
    Returns a scalar tensor of shape () in logp's dtype; only logp receives a gradient
    (dL/dlogp = -m w A / max(1, N)). The denominator N counts every valid token, rejected ones
    included. An all-zero mask returns a zero that is still connected to logp's graph.
    Raises ValueError like masked_is_weights, and when advantages is not of shape [B].
    """
    raise NotImplementedError("offpolicy_loss is not implemented yet")
