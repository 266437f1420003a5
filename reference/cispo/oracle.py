"""Scalar-loop oracle for CISPO: Python floats and math.exp over (b, t), skipping padding.

Same functions as the reference, plus `cispo_loss_grad` (the analytic gradient of the loss with
respect to logp, which the loss's stop-gradients make simple: -m * r_hat * A * tis / max(1, N)).
Validation is not repeated here: the oracle is only fed valid inputs.
"""

from __future__ import annotations

import math

import torch


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _weight(lp: float, anchor: float, eps_low: float, eps_high: float) -> float:
    return _clip(_exp(lp - anchor), 1.0 - eps_low, 1.0 + eps_high)


def _rows(x: torch.Tensor) -> list[list[float]]:
    return x.detach().to(torch.float64).tolist()


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    lp, an, m = _rows(logp), _rows(anchor_logp), _rows(mask)
    out = [[0.0] * len(row) for row in lp]
    for b in range(len(lp)):
        for t in range(len(lp[b])):
            if m[b][t] == 0:
                continue
            out[b][t] = _weight(lp[b][t], an[b][t], eps_low, eps_high)
    return torch.tensor(out, dtype=torch.float64).reshape(logp.shape)


def _coefficients(logp, old_logp, advantages, mask, rollout_logp, anchor, eps_low, eps_high,
                  tis_enabled):
    """Per-token d(loss)/d(logp) * N, and N."""
    lp, old, m = _rows(logp), _rows(old_logp), _rows(mask)
    ro = _rows(rollout_logp) if rollout_logp is not None else None
    adv = advantages.detach().to(torch.float64).tolist()
    anc = old if anchor == "old" else ro
    coef = [[0.0] * len(row) for row in lp]
    n = 0
    for b in range(len(lp)):
        for t in range(len(lp[b])):
            if m[b][t] == 0:
                continue
            n += 1
            c = -_weight(lp[b][t], anc[b][t], eps_low, eps_high) * adv[b]
            if tis_enabled:
                c *= _clip(_exp(old[b][t] - ro[b][t]), 0.0, 2.0)
            coef[b][t] = c
    return lp, m, coef, max(1, n)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    lp, m, coef, n = _coefficients(logp, old_logp, advantages, mask, rollout_logp, anchor,
                                   eps_low, eps_high, tis_enabled)
    total = 0.0
    for b in range(len(lp)):
        for t in range(len(lp[b])):
            if m[b][t] != 0:
                total += coef[b][t] * lp[b][t]
    return torch.tensor(total / n, dtype=torch.float64)


def cispo_loss_grad(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
                    eps_high=4.0, tis_enabled=False):
    """d cispo_loss / d logp, [B, L] float64 (0 at padding)."""
    lp, m, coef, n = _coefficients(logp, old_logp, advantages, mask, rollout_logp, anchor,
                                   eps_low, eps_high, tis_enabled)
    out = [[c / n for c in row] for row in coef]
    return torch.tensor(out, dtype=torch.float64).reshape(logp.shape)
