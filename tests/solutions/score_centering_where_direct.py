# CORRECT: mis head weight as where(band, p, 0) and tail alpha as where(band, 1, 0); none as q - rho p; float64 inside for float32 inputs
import math
import torch


def _check(mode, low, high):
    if mode == "none":
        return
    if mode not in ("tis", "mis"):
        raise ValueError("unknown mode")
    ok = isinstance(low, (int, float)) and isinstance(high, (int, float)) and math.isfinite(low) and math.isfinite(high) \
        and 0 <= low <= high and high > 0
    if not ok:
        raise ValueError("bad IS bounds")


def _coef(lp, lq, mode, low, high, eps):
    p, q = lp.exp(), lq.exp()
    a = (1 - q.sum(-1, keepdim=True)).clamp_min(eps)
    b = (1 - p.sum(-1, keepdim=True)).clamp_min(eps)
    rho = a / b
    inv = b / a
    if mode == "none":
        return q - rho * p
    r = torch.exp(lp - lq)
    if mode == "tis":
        return q * r.clamp(low, high) - rho * inv.clamp(low, high) * p
    band = (r >= low) & (r <= high)
    tail = ((inv >= low) & (inv <= high)).to(p.dtype)
    return torch.where(band, q * r, torch.zeros_like(p)) - tail * p


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _check(mode, low, high)
    if train_head_logp.shape != sampler_head_logp.shape or not train_head_logp.shape or train_head_logp.shape[-1] == 0:
        raise ValueError("shape")
    coef = _coef(train_head_logp.detach(), sampler_head_logp.detach(), mode, low, high, eps)
    return (coef * train_head_logp).sum(-1)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _check(mode, low, high)
    if not (logp.dim() == 2 and rollout_logp.shape == logp.shape and mask.shape == logp.shape):
        raise ValueError("shape")
    if advantages.dim() != 1 or len(advantages) != logp.shape[0]:
        raise ValueError("advantages")
    if train_head_logp.dim() != 3 or sampler_head_logp.shape != train_head_logp.shape \
            or train_head_logp.shape[:2] != logp.shape or train_head_logp.shape[2] == 0:
        raise ValueError("heads")
    dt = logp.dtype
    m = mask != 0
    f64 = torch.float64
    lp = torch.where(m, logp, 0.0)
    rl = torch.where(m, rollout_logp, 0.0).to(dt)
    th = torch.where(m[..., None], train_head_logp, -1.5)
    sh = torch.where(m[..., None], sampler_head_logp, -1.5)
    A = torch.where(m, advantages.detach()[:, None], 0.0).to(dt)
    r = torch.exp(lp.detach() - rl.detach())
    if mode == "none":
        w = torch.ones_like(r)
    elif mode == "tis":
        w = r.clamp(low, high)
    else:
        w = torch.where((r >= low) & (r <= high), r, torch.zeros_like(r))
    coef = _coef(th.detach(), sh.detach(), mode, low, high, eps)
    c = (coef * th).sum(-1).to(dt)
    tok = torch.where(m, A * c - A * w * lp, 0.0)
    cnt = m.sum().to(f64).clamp_min(1.0)
    return (tok.to(f64).sum() / cnt).to(dt)
