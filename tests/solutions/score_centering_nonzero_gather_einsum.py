# A correct solution in another style (a held-out-style probe, written from spec.md alone): valid tokens gathered by nonzero() indices (no padding ever enters the arithmetic), the head reduced by einsum('...k,...k->...'), a graph-connected zero from the gathered (empty) tensors.
import math
import torch

MODES = ("none", "tis", "mis")


def _check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high and high > 0):
            raise ValueError("bounds")


def _f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(min=low, max=high)
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def _coef(tp, sp, mode, low, high, eps):
    tp, sp = tp.detach(), sp.detach()
    p, q = tp.exp(), sp.exp()
    P, Q = p.sum(-1, keepdim=True), q.sum(-1, keepdim=True)
    rho = (1 - Q).clamp(min=eps) / (1 - P).clamp(min=eps)
    alpha = rho * _f(1 / rho, mode, low, high)
    return q * _f(torch.exp(tp - sp), mode, low, high) - alpha * p


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    if train_head_logp.shape != sampler_head_logp.shape or train_head_logp.dim() < 1 or train_head_logp.shape[-1] < 1:
        raise ValueError("heads")
    c = _coef(train_head_logp, sampler_head_logp, mode, low, high, eps)
    return torch.einsum("...k,...k->...", c, train_head_logp)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("[B, L]")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError("advantages")
    if train_head_logp.dim() != 3 or train_head_logp.shape[:2] != (B, L) \
            or sampler_head_logp.shape != train_head_logp.shape or train_head_logp.shape[-1] < 1:
        raise ValueError("heads")
    bi, ti = (mask != 0).nonzero(as_tuple=True)
    n = bi.numel()
    lp = logp[bi, ti]
    rl = rollout_logp[bi, ti].detach().to(logp.dtype)
    th = train_head_logp[bi, ti]
    sh = sampler_head_logp[bi, ti]
    A = advantages.detach().to(logp.dtype)[bi]
    w = _f(torch.exp(lp.detach() - rl), mode, low, high)
    c = sc_correction(th, sh, mode=mode, low=low, high=high, eps=eps).to(logp.dtype)
    tot = (-A * w * lp + A * c).sum()
    # graph-connected even when no token is valid (the index gathers keep the graph)
    tot = tot + (lp.sum() + th.sum()) * 0 if n == 0 else tot
    return tot / max(1, n)
