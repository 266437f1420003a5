# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# loss written as A*(c - w*logp) with sums over L first, float64 accumulation, then cast.
import math
import torch


def _chk(mode, low, high):
    if mode not in ("none", "tis", "mis"):
        raise ValueError("mode")
    if mode != "none" and not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high and high > 0):
        raise ValueError("bounds")


def _f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _chk(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("shape")
    lp, lq = train_head_logp.detach(), sampler_head_logp.detach()
    p, q = lp.exp(), lq.exp()
    rho = (1 - q.sum(-1, keepdim=True)).clamp_min(eps) / (1 - p.sum(-1, keepdim=True)).clamp_min(eps)
    alpha = rho * _f(rho.reciprocal(), mode, low, high)
    coef = (q * _f((lp - lq).exp(), mode, low, high) - alpha * p)
    return torch.linalg.vecdot(coef, train_head_logp) if hasattr(torch.linalg, "vecdot") else (coef * train_head_logp).sum(-1)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _chk(mode, low, high)
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError("adv")
    if train_head_logp.dim() != 3 or train_head_logp.shape[:2] != (B, L) or sampler_head_logp.shape != train_head_logp.shape:
        raise ValueError("heads")
    dt = logp.dtype
    m = mask.bool()
    z = torch.zeros((), dtype=dt)
    lp = torch.where(m, logp, z)
    rl = torch.where(m, rollout_logp.to(dt), z)
    th = torch.where(m[..., None], train_head_logp, z.to(train_head_logp.dtype))
    sh = torch.where(m[..., None], sampler_head_logp, z.to(sampler_head_logp.dtype))
    w = _f((lp - rl).detach().exp(), mode, low, high)
    c = sc_correction(th, sh, mode, low, high, eps).to(dt)
    per_row = (c - w * lp).sum(1)                      # [B]
    s = (advantages.detach().to(torch.float64) * per_row.double()).sum()
    return (s / max(1, int(m.sum()))).to(dt)
