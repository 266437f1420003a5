# CORRECT (unusual): weights in old_logp's dtype as specified, PPO loss computed entirely in float64 and cast back to logp's dtype.
from __future__ import annotations
import math
import torch


def _check_band(low, high):
    low = float(low); high = float(high)
    if not (0.0 <= low <= high) or not math.isfinite(high) or not high > 0:
        raise ValueError(f"bad band [{low}, {high}]")


def _check_shapes(*ts):
    s = ts[0].shape
    for t in ts:
        if t.dim() != 2 or t.shape != s:
            raise ValueError(f"shapes {[tuple(x.shape) for x in ts]}")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _check_shapes(old_logp, rollout_logp, mask)
    _check_band(low, high)
    m = mask.bool()
    with torch.no_grad():
        o = torch.where(m, old_logp.detach(), torch.zeros((), dtype=old_logp.dtype))
        r = torch.where(m, rollout_logp.detach(), torch.zeros((), dtype=old_logp.dtype)).to(old_logp.dtype)
        rho = torch.exp(o - r)
        keep = (rho >= low) & (rho <= high) & m
        return torch.where(keep, rho, torch.zeros((), dtype=rho.dtype))


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _check_shapes(logp, old_logp, rollout_logp, mask)
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)} != ({B},)")
    _check_band(low, high)
    out_dt = logp.dtype
    dt = torch.float64
    logp = logp.to(dt)
    m = mask.bool()
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).to(dt)
    A = advantages.detach().to(dt)[:, None].expand(B, L)
    lp = torch.where(m, logp, torch.zeros((), dtype=dt))
    olp = torch.where(m, old_logp.detach().to(dt), torch.zeros((), dtype=dt))
    lr = lp - olp
    # A>0: cap log-ratio at log(1+eps_high) so exp never overflows on the graph
    cap = math.log1p(eps_high) if eps_high > -1 else float("inf")
    lr_safe = torch.where(A > 0, torch.clamp(lr, max=cap), lr)
    r = torch.exp(lr_safe)
    s1 = r * A
    s2 = torch.clamp(r, 1 - eps_low, 1 + eps_high) * A
    ell = -torch.minimum(s1, s2)
    tok = torch.where(m, w * ell, torch.zeros((), dtype=dt))
    if per_token_loss:
        n = m.sum()
        return (tok.sum() / n.clamp(min=1).to(dt)).to(out_dt)
    n_i = m.sum(dim=1).clamp(min=1).to(dt)
    per = tok.sum(dim=1) / n_i
    return (per.sum() / max(B, 1)).to(out_dt)
