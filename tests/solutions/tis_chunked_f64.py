# CORRECT: float64 internally for every input dtype, chunked over L in pieces of 4, cast back.
import math, torch

def _ck(lo, hi):
    if not (math.isfinite(hi) and hi > 0): raise ValueError("tis upper")
    if not (0 <= lo <= hi): raise ValueError("tis lower")

def _w(o, r, v, lo, hi):
    z = torch.zeros((), dtype=torch.float64)
    d = torch.where(v, o.detach().double(), z) - torch.where(v, r.detach().double(), z)
    return torch.where(v, d.exp().clamp(lo, hi), z)

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _ck(clip_low, clip_high)
    if mask.dim() != 2 or old_logp.shape != mask.shape or rollout_logp.shape != mask.shape: raise ValueError("shape")
    return _w(old_logp, rollout_logp, mask != 0, clip_low, clip_high).to(old_logp.dtype)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _ck(tis_low, tis_high)
    if mask.dim() != 2 or any(t.shape != mask.shape for t in (logp, old_logp, rollout_logp)): raise ValueError("shape")
    if advantages.shape != mask.shape[:1]: raise ValueError("adv")
    v = mask != 0
    B, L = mask.shape
    A = advantages.detach().double()[:, None]
    rows = torch.zeros(B, dtype=torch.float64) + torch.where(v, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0
    z = torch.zeros((), dtype=torch.float64)
    for s in range(0, L, 4):
        vv = v[:, s:s + 4]
        w = _w(old_logp[:, s:s + 4], rollout_logp[:, s:s + 4], vv, tis_low, tis_high)
        lr = torch.where(vv, logp[:, s:s + 4].double(), z) - torch.where(vv, old_logp[:, s:s + 4].detach().double(), z)
        rd = lr.detach().exp()
        c = rd.clamp(1 - eps_low, 1 + eps_high) * A
        pc = ~(rd * A <= c)
        r = torch.where(pc, z, lr).exp()
        tok = torch.where(vv, w * torch.where(pc, -c, -r * A), z)
        rows = rows + tok.sum(1)
    n = v.sum(1)
    if per_token_loss:
        out = rows.sum() / max(1, int(n.sum()))
    else:
        out = (rows / n.clamp(min=1)).sum() / max(1, B)
    return out.to(logp.dtype)
