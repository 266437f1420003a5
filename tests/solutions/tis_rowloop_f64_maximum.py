# CORRECT: per-row Python loop with a detached branch choice (r A <= clip(r) A); float64
# accumulation, cast back to logp's dtype.
import math, torch

def _b(lo, hi):
    if not (math.isfinite(hi) and hi > 0): raise ValueError(f"upper bound {hi}")
    if not (lo >= 0 and lo <= hi): raise ValueError(f"lower bound {lo}")

def _sh(mask, *ts, adv=None):
    if mask.dim() != 2 or any(t.shape != mask.shape for t in ts): raise ValueError(f"shapes {[tuple(t.shape) for t in ts]} {tuple(mask.shape)}")
    if adv is not None and tuple(adv.shape) != (mask.shape[0],): raise ValueError(f"adv {tuple(adv.shape)}")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _b(clip_low, clip_high); _sh(mask, old_logp, rollout_logp)
    out = torch.zeros(old_logp.shape, dtype=old_logp.dtype)
    v = mask != 0
    for i in range(mask.shape[0]):
        idx = v[i].nonzero().flatten()
        if idx.numel():
            d = old_logp[i, idx].detach() - rollout_logp[i, idx].detach()
            out[i, idx] = d.exp().clamp(clip_low, clip_high)
    return out

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _b(tis_low, tis_high); _sh(mask, logp, old_logp, rollout_logp, adv=advantages)
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    v = mask != 0
    B = mask.shape[0]
    rows, counts = [], []
    for i in range(B):
        idx = v[i].nonzero().flatten()
        counts.append(idx.numel())
        if idx.numel() == 0:
            rows.append(None); continue
        a = advantages[i].detach().to(logp.dtype)
        lr = logp[i, idx] - old_logp[i, idx].detach()
        with torch.no_grad():
            rd = lr.exp()
            cl = rd.clamp(1 - eps_low, 1 + eps_high)
            use_r = (rd * a) <= (cl * a)
        r = torch.where(use_r, lr, torch.zeros_like(lr)).exp()
        l = torch.where(use_r, -r * a, -cl * a)
        rows.append((w[i, idx] * l).double().sum())
    zero = torch.where(v, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0
    if per_token_loss:
        tot = sum((x for x in rows if x is not None), torch.zeros((), dtype=torch.float64))
        return zero + (tot / max(1, sum(counts))).to(logp.dtype)
    tot = sum(((x / max(1, c)) for x, c in zip(rows, counts) if x is not None), torch.zeros((), dtype=torch.float64))
    return zero + (tot / max(1, B)).to(logp.dtype)
