# CORRECT (style): python loops over groups, rows and tokens; group statistics with math.fsum in float64, cast back (fifth probing round).
import math, torch
def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not torch.is_tensor(rewards) or rewards.dim() != 1:
        raise ValueError("rewards must be 1-D; got shape %s" % (tuple(getattr(rewards, 'shape', ())),))
    if group_size <= 0:
        raise ValueError("group_size must be > 0")
    N = rewards.numel()
    if N % group_size:
        raise ValueError("N=%d not divisible by %d" % (N, group_size))
    vals = rewards.detach().to(torch.float64).tolist()
    out = []
    for g in range(N // group_size):
        grp = vals[g*group_size:(g+1)*group_size]
        mu = math.fsum(grp) / group_size
        c = [x - mu for x in grp]
        if normalize_std:
            sd = math.sqrt(math.fsum(v*v for v in c) / group_size)
            c = [v / (sd + eps) for v in c]
        out += c
    return torch.tensor(out, dtype=rewards.dtype).reshape(N)

def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D, got {tuple(logp.shape)}")
    if old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes differ: {tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(mask.shape)}")
    B, L = logp.shape
    if advantages.dim() != 1 or advantages.shape[0] != B:
        raise ValueError(f"advantages must be [{B}], got {tuple(advantages.shape)}")
    total = logp.new_zeros(()) + 0 * torch.where(mask.bool(), logp, torch.zeros((), dtype=logp.dtype)).sum()
    ntot = 0
    rows = []
    lo, hi = 1 - clip_low, 1 + clip_high
    for i in range(B):
        a = advantages[i].detach().to(logp.dtype)
        acc = logp.new_zeros(()); n = 0
        for t in range(L):
            if not bool(mask[i, t]):
                continue
            n += 1
            d = logp[i, t] - old_logp[i, t].detach()
            with torch.no_grad():
                rr = torch.exp(d)
                c = torch.clamp(rr, lo, hi)
                clip_side = bool(rr * a > c * a) or bool(torch.isnan(rr * a))
            if clip_side:
                acc = acc - c * a + 0 * d.clamp(-1, 1)
            else:
                acc = acc - torch.exp(d) * a
        rows.append((acc, n))
        ntot += n
    if per_token_loss:
        for acc, n in rows:
            total = total + acc
        return total / max(1, ntot)
    for acc, n in rows:
        total = total + acc / max(1, n)
    return total / max(1, B)
