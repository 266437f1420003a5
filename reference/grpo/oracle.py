"""Scalar-loop oracle for GRPO: Python floats, math.sqrt / math.exp, loops over groups and (b, t).

Same functions as the reference (results as float64 tensors), plus ``grpo_loss_grad``: the
analytic gradient ∂loss/∂logp, which T1 compares with the gradient autograd computes through
the submission. Positions with mask 0 are skipped, so padding values are never read.
"""

from __future__ import annotations

import math

import torch


def _floats(x):
    return x.detach().to(torch.float64).tolist()


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError("rewards must be 1-D")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError("group_size must be a positive int")
    r = _floats(rewards)
    if len(r) % group_size != 0:
        raise ValueError("N is not a multiple of group_size")
    out = []
    for start in range(0, len(r), group_size):
        g = r[start:start + group_size]
        mean = math.fsum(g) / group_size
        var = math.fsum((x - mean) ** 2 for x in g) / group_size     # population variance
        sigma = math.sqrt(var)
        for x in g:
            a = x - mean
            out.append(a / (sigma + eps) if normalize_std else a)
    return torch.tensor(out, dtype=torch.float64)


def _token_terms(lp, old, a, clip_low, clip_high):
    """(loss, dloss/dlogp) of one valid token."""
    d = lp - old
    r = math.exp(d) if d < 709.0 else math.inf   # an overflowing ratio is inf, as in torch
    lo, hi = 1.0 - clip_low, 1.0 + clip_high
    rc = min(max(r, lo), hi)
    unclipped, clipped = r * a, rc * a
    if unclipped <= clipped:          # (inf * 0 = NaN compares False: the clipped term, 0)          # min picks r·A: gradient −A·r (a tie inside the range agrees)
        return -unclipped, -a * r
    return -clipped, 0.0              # clip(r)·A is constant in logp outside the range


def _per_token(logp, old_logp, advantages, mask, clip_low, clip_high):
    lp, od, adv, m = _floats(logp), _floats(old_logp), _floats(advantages), _floats(mask)
    B = len(lp)
    L = len(lp[0]) if B else 0
    loss = [[0.0] * L for _ in range(B)]
    grad = [[0.0] * L for _ in range(B)]
    n = [0] * B
    for b in range(B):
        for t in range(L):
            if m[b][t] == 0:
                continue
            loss[b][t], grad[b][t] = _token_terms(lp[b][t], od[b][t], adv[b], clip_low, clip_high)
            n[b] += 1
    return loss, grad, n


def _weights(n, per_token_loss):
    """Weight of each valid token of response b in the aggregated loss."""
    B = len(n)
    if per_token_loss:
        total = max(1, sum(n))
        return [1.0 / total] * B
    return [1.0 / (max(1, B) * max(1, nb)) for nb in n]


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    loss, _, n = _per_token(logp, old_logp, advantages, mask, clip_low, clip_high)
    w = _weights(n, per_token_loss)
    total = math.fsum(w[b] * x for b, row in enumerate(loss) for x in row)
    return torch.tensor(total, dtype=torch.float64)


def grpo_loss_grad(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2,
                   per_token_loss=False):
    """∂ grpo_loss / ∂ logp, [B, L] float64, exactly 0 at padded positions."""
    _, grad, n = _per_token(logp, old_logp, advantages, mask, clip_low, clip_high)
    w = _weights(n, per_token_loss)
    B = len(grad)
    L = logp.shape[1]
    return torch.tensor([[w[b] * grad[b][t] for t in range(L)] for b in range(B)],
                        dtype=torch.float64).reshape(B, L)
