# A correct solution in another style (a held-out-style probe, written from spec.md alone).
import math
import torch

MODES = ("none", "tis", "mis")


def check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError("mode")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high and high > 0.0):
            raise ValueError("bounds")


def f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    keep = (x >= low) & (x <= high)
    return torch.where(keep, x, torch.zeros_like(x))


def correction(th, sh, mode, low, high, eps):
    lp, lq = th.detach(), sh.detach()
    p, q = lp.exp(), lq.exp()
    rho = (1 - q.sum(-1)).clamp_min(eps) / (1 - p.sum(-1)).clamp_min(eps)
    alpha = rho * f(rho.reciprocal(), mode, low, high)
    w = f((lp - lq).exp(), mode, low, high)
    return ((q * w - alpha.unsqueeze(-1) * p) * th).sum(-1)


def check_loss(logp, rollout_logp, th, sh, advantages, mask):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError("adv")
    if th.dim() != 3 or th.shape[:2] != (B, L) or sh.shape != th.shape:
        raise ValueError("heads")


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    check_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    m = mask.bool()
    m3 = m.unsqueeze(-1)
    zero = torch.zeros((), dtype=logp.dtype)
    lv = torch.where(m, logp, zero)
    rv = torch.where(m, rollout_logp, zero)
    th = torch.where(m3, train_head_logp, zero)
    sh = torch.where(m3, sampler_head_logp, zero)
    w = f((lv - rv).detach().exp(), mode, low, high)
    c = correction(th, sh, mode, low, high, eps)
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)
    per = -A * w * lv + A * c
    return per.sum() / m.sum().clamp_min(1).to(logp.dtype)

# CORRECT: per-position Python loops over a flattened reshape, all detached arithmetic in float64,
# result cast back to the input dtype.
def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("heads")
    k = train_head_logp.shape[-1]
    lead = train_head_logp.shape[:-1]
    th = train_head_logp.reshape(-1, k)
    sh = sampler_head_logp.reshape(-1, k)
    out = []
    for i in range(th.shape[0]):
        lp = th[i].detach().double()
        lq = sh[i].detach().double()
        p, q = lp.exp(), lq.exp()
        rho = max(1 - float(q.sum()), eps) / max(1 - float(p.sum()), eps)
        rt = torch.tensor(1.0 / rho, dtype=train_head_logp.dtype).double()
        a = rho * float(f(rt, mode, low, high))
        r = (th[i].detach() - sh[i].detach()).exp()   # ratio in the input dtype
        w = f(r, mode, low, high).double()
        coef = (q * w - a * p).to(train_head_logp.dtype)
        out.append((coef * th[i]).sum())
    if not out:
        return train_head_logp.sum(-1)
    return torch.stack(out).reshape(lead)
