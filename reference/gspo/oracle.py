"""Scalar-loop oracle for GSPO: Python floats, math.exp, loops over (b, t), mask-0 positions skipped.

Same functions as the exercise, returning float64 tensors; plus ``gspo_loss_grad``, the analytic
∂loss/∂logp (every valid token of an unclipped response i gets −A_i s_i / (B n_i); clipped or
empty responses get 0).
"""

import math

import torch


def _rows(x):
    return x.detach().to(torch.float64).tolist()


def _mask_rows(mask):
    return [[bool(v) for v in row] for row in mask.detach().tolist()]


def _seq(logp, old_logp, mask):
    lp, ol, m = _rows(logp), _rows(old_logp), _mask_rows(mask)
    s_list, n_list = [], []
    for b in range(len(lp)):
        total, n = 0.0, 0
        for t in range(len(lp[b])):
            if not m[b][t]:
                continue
            total += lp[b][t] - ol[b][t]
            n += 1
        # an overflowing ratio is inf, as in torch
        s_list.append((math.exp(total / n) if total / n < 709.0 else math.inf) if n else 1.0)
        n_list.append(n)
    return s_list, n_list, m


def sequence_ratio(logp, old_logp, mask):
    s, _, _ = _seq(logp, old_logp, mask)
    return torch.tensor(s, dtype=torch.float64)


def _clipped(s, a, clip_eps):
    return (a > 0 and s > 1.0 + clip_eps) or (a < 0 and s < 1.0 - clip_eps)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    s, n, _ = _seq(logp, old_logp, mask)
    adv = _rows(advantages)
    B = len(s)
    total = 0.0
    for b in range(B):
        if n[b] == 0:
            continue
        clipped_s = min(max(s[b], 1.0 - clip_eps), 1.0 + clip_eps)
        total += min(s[b] * adv[b], clipped_s * adv[b])
    return torch.tensor(-total / max(B, 1), dtype=torch.float64)


def gspo_loss_grad(logp, old_logp, advantages, mask, clip_eps=0.2):
    """∂ gspo_loss / ∂ logp, shape [B, L], float64."""
    s, n, m = _seq(logp, old_logp, mask)
    adv = _rows(advantages)
    B = len(s)
    L = logp.shape[1]
    grad = [[0.0] * L for _ in range(B)]
    for b in range(B):
        if n[b] == 0 or _clipped(s[b], adv[b], clip_eps):
            continue
        g = -adv[b] * s[b] / (B * n[b])
        for t in range(L):
            if m[b][t]:
                grad[b][t] = g
    return torch.tensor(grad, dtype=torch.float64).reshape(B, L)
