# CORRECT: chunked over L (chunks of 7 columns), sums accumulated in the input dtype
import math
import torch

MODES = ("none", "tis", "mis")


def _check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high and high > 0.0):
            raise ValueError("bad bounds")


def _check_loss_shapes(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shapes")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError("advantages")
    if train_head_logp.dim() != 3 or tuple(train_head_logp.shape[:2]) != (B, L) or sampler_head_logp.shape != train_head_logp.shape:
        raise ValueError("heads")


def _f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("heads")
    lp, lq = train_head_logp.detach(), sampler_head_logp.detach()
    p, q = torch.exp(lp), torch.exp(lq)
    one = torch.ones((), dtype=lp.dtype)
    rho = torch.clamp(one - q.sum(dim=-1), min=eps) / torch.clamp(one - p.sum(dim=-1), min=eps)
    a = rho * _f(one / rho, mode, low, high)
    coef = q * _f(torch.exp(lp - lq), mode, low, high) - a.unsqueeze(-1) * p
    return (coef * train_head_logp).sum(dim=-1)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    _check_loss_shapes(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    B, L = logp.shape
    m = mask != 0
    A = advantages.detach().to(logp.dtype).unsqueeze(1)
    total = torch.zeros((), dtype=logp.dtype)
    total = total + 0.0 * torch.where(m, logp, 0.0).sum() + 0.0 * torch.where(m[..., None], train_head_logp, 0.0).sum()
    for s in range(0, L, 7):
        e = min(L, s + 7)
        mm = m[:, s:e]
        lp = torch.where(mm, logp[:, s:e], 0.0)
        lr = torch.where(mm, rollout_logp[:, s:e].detach(), 0.0)
        th = torch.where(mm[..., None], train_head_logp[:, s:e], 0.0)
        sh = torch.where(mm[..., None], sampler_head_logp[:, s:e].detach(), 0.0)
        w = _f(torch.exp(lp.detach() - lr), mode, low, high)
        c = sc_correction(th, sh, mode, low, high, eps)
        total = total + torch.where(mm, -A * w * lp + A * c, 0.0).sum()
    n = int(m.sum())
    return total / max(n, 1)
