"""GSPO: sequence-level importance ratios and clipping.

Paper: Group Sequence Policy Optimization, https://arxiv.org/abs/2507.18071 (§4.1, §4.2).
Read spec.md for the full contract. Shapes: B responses, L token positions.
"""

import torch


def sequence_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sequence importance ratio s_i = exp( sum_t m_it (logp_it - old_logp_it) / n_i ), n_i = sum_t m_it.

    Args:
        logp:     [B, L] log-probabilities of the sampled tokens under the current policy (gets gradients).
        old_logp: [B, L] log-probabilities under the old (behaviour) policy; frozen (stop-gradient).
        mask:     [B, L] bool or 0/1 float; 1 marks a valid response token, 0 padding (which may hold
                  NaN, inf or 1e30: never read it, never multiply it by 0).

    Returns:
        s: [B], logp's dtype, differentiable w.r.t. logp; s_i = 1 for a response with no valid token.

    Raises:
        ValueError: unless logp is 2-D and old_logp and mask have exactly its shape.
    """
    raise NotImplementedError("sequence_ratio is not implemented yet")


def gspo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, clip_eps: float = 0.2) -> torch.Tensor:
    """GSPO loss: -(1/B) sum_i 1[n_i > 0] * min(s_i A_i, clip(s_i, 1 - clip_eps, 1 + clip_eps) A_i).

    Args:
        logp:       [B, L] current-policy log-probabilities (gets gradients, through s_i).
        old_logp:   [B, L] old-policy log-probabilities (frozen).
        advantages: [B] one advantage per response (frozen); [B, 1] or [B, L] is a ValueError.
        mask:       [B, L] bool or 0/1 float; padding may hold NaN, inf or 1e30.
        clip_eps:   the clip half-width epsilon.

    Returns:
        loss: shape (), logp's dtype, connected to logp's graph (also when every response is empty:
              then it is a differentiable 0). Empty responses count in B and contribute 0.

    Raises:
        ValueError: on any shape mismatch (see sequence_ratio) or advantages not of shape [B].
    """
    raise NotImplementedError("gspo_loss is not implemented yet")
