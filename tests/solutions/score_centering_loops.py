# CORRECT: per-position python loops for the correction (float64 math via torch scalars), masked_fill neutralisation
import math
import torch


def _bounds(mode, low, high):
    if mode not in ("none", "tis", "mis"):
        raise ValueError(f"mode {mode!r}")
    if mode == "none":
        return
    try:
        lo, hi = float(low), float(high)
    except (TypeError, ValueError):
        raise ValueError("bounds") from None
    if math.isnan(lo) or math.isnan(hi) or math.isinf(lo) or math.isinf(hi) or not (0 <= lo <= hi) or not hi > 0:
        raise ValueError("bounds")


def _f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return torch.minimum(torch.maximum(x, torch.full_like(x, low)), torch.full_like(x, high))
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def _one(tp, sp, mode, low, high, eps):
    # tp, sp: [k]
    lp, lq = tp.detach(), sp.detach()
    P = torch.zeros((), dtype=tp.dtype)
    Q = torch.zeros((), dtype=tp.dtype)
    for v in range(tp.shape[0]):
        P = P + torch.exp(lp[v])
        Q = Q + torch.exp(lq[v])
    one = torch.ones((), dtype=tp.dtype)
    a, b = torch.maximum(one - Q, torch.full_like(Q, eps)), torch.maximum(one - P, torch.full_like(P, eps))
    rho = a / b
    alpha = rho * _f(b / a, mode, low, high)
    total = None
    for v in range(tp.shape[0]):
        coef = torch.exp(lq[v]) * _f(torch.exp(lp[v] - lq[v]), mode, low, high) - alpha * torch.exp(lp[v])
        term = coef.detach() * tp[v]
        total = term if total is None else total + term
    return total


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _bounds(mode, low, high)
    if tuple(train_head_logp.shape) != tuple(sampler_head_logp.shape) or train_head_logp.ndim == 0 or train_head_logp.shape[-1] == 0:
        raise ValueError("shape")
    lead = train_head_logp.shape[:-1]
    k = train_head_logp.shape[-1]
    tp = train_head_logp.reshape(-1, k)
    sp = sampler_head_logp.reshape(-1, k)
    if tp.shape[0] == 0:
        return (train_head_logp.sum(-1) * 0)
    outs = [_one(tp[i], sp[i], mode, low, high, eps) for i in range(tp.shape[0])]
    return torch.stack(outs).reshape(lead)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _bounds(mode, low, high)
    if logp.ndim != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError("advantages")
    if (train_head_logp.ndim != 3 or sampler_head_logp.shape != train_head_logp.shape
            or tuple(train_head_logp.shape[:2]) != (B, L) or train_head_logp.shape[2] == 0):
        raise ValueError("heads")
    pad = ~mask.bool()
    lp = logp.masked_fill(pad, 0.0)
    rl = rollout_logp.masked_fill(pad, 0.0).to(logp.dtype)
    th = train_head_logp.masked_fill(pad.unsqueeze(-1), -2.0)
    sh = sampler_head_logp.masked_fill(pad.unsqueeze(-1), -2.0)
    A = advantages.detach().to(logp.dtype).unsqueeze(1).expand(B, L).masked_fill(pad, 0.0)
    w = _f(torch.exp(lp.detach() - rl.detach()), mode, low, high)
    c = sc_correction(th, sh.detach(), mode, low, high, eps).to(logp.dtype)
    per = (-A * w * lp + A * c).masked_fill(pad, 0.0)
    cnt = int((~pad).sum())
    return per.sum() / max(1, cnt)
