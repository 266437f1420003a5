"""CORRECT: rho formed in float64 (exact difference, then exp) and rounded back to the input dtype before the band comparison in that dtype; the next float outward of a bound tie may then round onto the bound."""
import math

import torch


def _check_band(low, high):
    if not (low >= 0 and high > 0 and math.isfinite(high) and low <= high):
        raise ValueError("bad band")


def _check2(*ts):
    if any(t.dim() != 2 for t in ts) or len({tuple(t.shape) for t in ts}) != 1:
        raise ValueError("inputs must be 2-D and share one [B, L] shape")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _check2(old_logp, rollout_logp, mask)
    _check_band(low, high)
    valid = mask.bool()
    z = torch.zeros((), dtype=torch.float64)
    d = torch.where(valid, old_logp.detach().double(), z) - torch.where(valid, rollout_logp.detach().double(), z)
    rho = torch.exp(d).to(old_logp.dtype)          # correctly rounded ratio in the input dtype
    keep = valid & (rho >= low) & (rho <= high)    # compared in that dtype
    return torch.where(keep, rho, torch.zeros_like(rho))


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _check2(logp, old_logp, rollout_logp, mask)
    B, L = logp.shape
    if advantages.dim() != 1 or advantages.shape[0] != B:
        raise ValueError("advantages must be [B]")
    _check_band(low, high)
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    valid = mask.bool()
    dt = logp.dtype
    z = torch.zeros((), dtype=dt)
    A = advantages.detach().to(dt)[:, None].expand(B, L)
    lr = torch.where(valid, logp, z) - torch.where(valid, old_logp.detach(), z)
    cap = math.log1p(eps_high) if eps_high > -1 else -math.inf
    big = (A > 0) & (lr.detach() > cap)            # clipped anyway: keep exp off the graph
    r = torch.where(big, torch.exp(lr.detach()), torch.exp(torch.where(big, torch.zeros_like(lr), lr)))
    ell = -torch.minimum(r * A, torch.clamp(r, 1 - eps_low, 1 + eps_high) * A)
    tok = torch.where(valid, w * ell, z)
    m = valid.to(dt)
    if per_token_loss:
        return tok.sum() / m.sum().clamp(min=1)
    return (tok.sum(-1) / m.sum(-1).clamp(min=1)).sum() / max(B, 1)
