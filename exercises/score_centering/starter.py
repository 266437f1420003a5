"""Score centering with a top-k sampler head: your implementation goes here.

Read spec.md for the full contract. Both functions must preserve the input dtype (float32 or
float64), never modify their inputs, and raise ValueError on an unknown `mode`, on bad IS bounds
(for "tis"/"mis": finite 0 <= low <= high, high > 0) and on inconsistent shapes.
"""

import torch


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    """Head-only score-centering correction c, one value per position.

    Args:
        train_head_logp:   [..., k] trainer log-probs log p_v of the sampler's top-k head tokens,
                           normalised over the FULL vocabulary (never renormalise over the head).
                           Differentiable: the gradient flows only through the final log p_v.
        sampler_head_logp: [..., k] sampler log-probs log q_v of the same tokens (frozen).
        mode:              "none" (f = 1), "tis" (f(x) = clamp(x, low, high)) or
                           "mis" (f(x) = x * 1[low <= x <= high], closed band).
        low, high:         IS bounds for "tis"/"mis".
        eps:               floor of the tail masses 1 - P_H and 1 - Q_H.

    Returns:
        Tensor[...]: c = sum_{v in H} sg(q_v f(p_v/q_v) - alpha' p_v) * log p_v, with
        rho = max(1 - Q_H, eps) / max(1 - P_H, eps) and alpha' = rho * f(1 / rho).
    """
    raise NotImplementedError("sc_correction is not implemented yet")


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    """REINFORCE loss with an IS weight and the score-centering correction, token-mean.

    Args:
        logp:              [B, L] trainer log-prob of each sampled token (differentiable).
        rollout_logp:      [B, L] sampler log-prob of each sampled token (frozen).
        train_head_logp:   [B, L, k] trainer log-probs of the sampler's head (differentiable).
        sampler_head_logp: [B, L, k] sampler log-probs of the head (frozen).
        advantages:        [B] one advantage per response, broadcast over its tokens (frozen).
        mask:              [B, L] bool or 0/1 float; padded positions may hold NaN/inf anywhere,
                           heads included.
        mode, low, high, eps: as in sc_correction.

    Returns:
        Tensor[] (a 0-d tensor): sum m * (-A * w_a * logp + A * c) / max(1, sum m), with
        w_a = f(exp(sg(logp) - rollout_logp)) detached and c from sc_correction (not weighted by w_a).
    """
    raise NotImplementedError("sc_policy_loss is not implemented yet")
