# CORRECT (unusual style): per-response Python loop, float64 inside, Python-int counts.
import torch


def _check(logp, old_logp, mask):
    if logp.ndim != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"logp {tuple(logp.shape)} old_logp {tuple(old_logp.shape)} mask {tuple(mask.shape)}")


def _mean_logrs(logp, old_logp, mask):
    B = logp.shape[0]
    mb = mask.bool()
    out, counts = [], []
    for i in range(B):
        idx = torch.nonzero(mb[i]).flatten()
        k = int(idx.numel())
        counts.append(k)
        if k == 0:
            out.append(logp[i].sum().mul(0).nan_to_num(0.0, 0.0, 0.0).to(torch.float64) * 0 if False else torch.zeros((), dtype=torch.float64))
        else:
            d = logp[i, idx].to(torch.float64) - old_logp[i, idx].detach().to(torch.float64)
            out.append(d.sum() / k)
    return out, counts


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    if logp.shape[0] == 0:
        return logp.new_empty(0) + logp.sum(dim=1)
    ml, _ = _mean_logrs(logp, old_logp, mask)
    return torch.stack([torch.exp(x) for x in ml]).to(logp.dtype)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)} must be ({B},)")
    total = torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, 0).sum()  # connected zero
    ml, counts = _mean_logrs(logp, old_logp, mask)
    lo = torch.tensor(1 - clip_eps, dtype=logp.dtype)
    hi = torch.tensor(1 + clip_eps, dtype=logp.dtype)
    for i in range(B):
        if counts[i] == 0:
            continue
        a = float(advantages[i].detach())
        s_dt = torch.exp(ml[i].detach()).to(logp.dtype)  # compare in logp's dtype
        if (a > 0 and s_dt > hi) or (a < 0 and s_dt < lo):
            total = total - ((hi if a > 0 else lo) * a)
        else:
            total = total - (torch.exp(ml[i]).to(logp.dtype) * a)
    return total / B if B else total
