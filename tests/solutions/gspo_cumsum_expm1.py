# CORRECT (style): row sums via cumsum's last column, masked_fill, unclipped value A*(1+expm1(log s)), no_grad decision
import torch

def _chk(logp, old_logp, mask, adv=None):
    if logp.ndim != 2:
        raise ValueError(f"logp {tuple(logp.shape)}")
    if old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"{tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(mask.shape)}")
    if adv is not None and adv.shape != logp.shape[:1]:
        raise ValueError(f"advantages {tuple(adv.shape)}")

def _ls(logp, old_logp, mask):
    pad = ~mask.bool()
    d = logp.masked_fill(pad, 0) - old_logp.detach().masked_fill(pad, 0)
    if d.shape[1] == 0:
        tot = d.sum(1)
    else:
        tot = d.cumsum(1)[:, -1]
    n = (~pad).sum(1)
    return tot / n.clamp(min=1).to(logp.dtype), n

def sequence_ratio(logp, old_logp, mask):
    _chk(logp, old_logp, mask)
    return _ls(logp, old_logp, mask)[0].exp()

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _chk(logp, old_logp, mask, advantages)
    ls, n = _ls(logp, old_logp, mask)
    A = advantages.detach().to(logp.dtype)
    with torch.no_grad():
        s = ls.exp()
        hi = (A > 0) & (s > 1 + clip_eps)
        lo = (A < 0) & (s < 1 - clip_eps)
        clip = hi | lo
        const = torch.where(hi, (1 + clip_eps) * A, (1 - clip_eps) * A)
    lsg = ls.masked_fill(clip, 0)
    val = torch.where(clip, const, A * (1 + torch.expm1(lsg)))
    val = val.masked_fill(n == 0, 0)
    return -val.sum() / max(1, logp.shape[0])
