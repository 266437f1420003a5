# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# straight-through form for c, mis head as where(band, q*r), per-row sums then total.
import math
import torch


def _chk(mode, low, high):
    if mode not in ("none", "tis", "mis"):
        raise ValueError("mode")
    if mode != "none":
        if math.isnan(low) or math.isnan(high) or math.isinf(low) or math.isinf(high) or low < 0 or low > high or high <= 0:
            raise ValueError("bounds")


def _coef(tl, sl, mode, low, high, eps):
    tl, sl = tl.detach(), sl.detach()
    p, q = tl.exp(), sl.exp()
    rho = (1 - q.sum(-1, keepdim=True)).clamp_min(eps) / (1 - p.sum(-1, keepdim=True)).clamp_min(eps)
    if mode == "none":
        return q - rho * p
    r = (tl - sl).exp()
    if mode == "tis":
        return q * r.clamp(low, high) - rho * rho.reciprocal().clamp(low, high) * p
    inv = rho.reciprocal()
    alpha = ((inv >= low) & (inv <= high)).to(p.dtype)
    keep = (r >= low) & (r <= high)
    return torch.where(keep, q * r, torch.zeros_like(p)) - alpha * p


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _chk(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("shape")
    coef = _coef(train_head_logp, sampler_head_logp, mode, low, high, eps)
    x = train_head_logp
    return (coef * (x - x.detach())).sum(-1) + (coef * x.detach()).sum(-1)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _chk(mode, low, high)
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.dim() != 1 or advantages.shape[0] != B:
        raise ValueError("adv")
    if train_head_logp.dim() != 3 or train_head_logp.shape[0] != B or train_head_logp.shape[1] != L or sampler_head_logp.shape != train_head_logp.shape:
        raise ValueError("heads")
    m = mask != 0
    dt = logp.dtype
    z = torch.zeros((), dtype=dt)
    lp = torch.where(m, logp, z)
    rl = torch.where(m, rollout_logp, z).to(dt)
    th = torch.where(m[..., None], train_head_logp, torch.zeros((), dtype=train_head_logp.dtype))
    sh = torch.where(m[..., None], sampler_head_logp, torch.zeros((), dtype=sampler_head_logp.dtype))
    r = (lp.detach() - rl.detach()).exp()
    if mode == "none":
        w = torch.ones_like(r)
    elif mode == "tis":
        w = r.clamp(low, high)
    else:
        w = torch.where((r >= low) & (r <= high), r, torch.zeros_like(r))
    c = sc_correction(th, sh.detach(), mode, low, high, eps).to(dt)
    A = advantages.detach().to(dt).view(B, 1)
    tok = torch.where(m, A * c - A * w * lp, z)
    rows = tok.sum(1)
    return rows.sum() / torch.clamp(m.sum(), min=1).to(dt)
