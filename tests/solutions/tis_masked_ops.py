# CORRECT (style): torch.masked.sum reductions under the bool mask, count_nonzero counts (fifth probing round).
import math
import torch

def _bounds(lo, hi):
    if not (0 <= lo <= hi and math.isfinite(hi) and hi > 0):
        raise ValueError(f"bad TIS bounds [{lo}, {hi}]")

def _shapes(*ts):
    s = ts[0].shape
    if ts[0].dim() != 2 or any(t.shape != s for t in ts):
        raise ValueError(f"shapes {[tuple(t.shape) for t in ts]}")

def _w(old_logp, rollout_logp, m, lo, hi):
    z = torch.zeros((), dtype=old_logp.dtype)
    d = torch.where(m, old_logp.detach(), z) - torch.where(m, rollout_logp.detach(), z)
    w = torch.exp(d).clamp(lo, hi)
    return torch.where(m, w, z).detach()

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _shapes(old_logp, rollout_logp, mask)
    _bounds(clip_low, clip_high)
    return _w(old_logp, rollout_logp, mask.bool(), clip_low, clip_high)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _shapes(logp, old_logp, rollout_logp, mask)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    _bounds(tis_low, tis_high)
    m = mask.bool()
    z = torch.zeros((), dtype=logp.dtype)
    w = _w(old_logp, rollout_logp, m, tis_low, tis_high)
    d = torch.where(m, logp, z) - torch.where(m, old_logp.detach(), z)
    A = advantages.detach().to(logp.dtype)[:, None]
    with torch.no_grad():
        r0 = torch.exp(d)
        lo, hi = 1 - eps_low, 1 + eps_high
        clipped = ((A > 0) & (r0 > hi)) | ((A < 0) & (r0 < lo))
    r = torch.exp(torch.where(clipped, z, d))
    ell = torch.where(clipped, -(r0.clamp(lo, hi) * A) + 0 * r, -(r * A))
    tok = w * torch.where(m, ell, z)
    n_i = torch.count_nonzero(m, dim=1).to(logp.dtype)
    if per_token_loss:
        return torch.masked.sum(tok, mask=m) / n_i.sum().clamp_min(1) if B else tok.sum()
    rows = torch.masked.sum(tok, 1, mask=m) if B else tok.sum(1)
    rows = torch.where(n_i > 0, rows, z)
    return (rows / n_i.clamp_min(1)).sum() / max(B, 1)
