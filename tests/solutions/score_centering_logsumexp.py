# CORRECT: head masses via logsumexp, log-space rho (exp of log differences), einsum reductions, where-neutralisation
import math
import torch


def _val(mode, low, high):
    if mode not in {"none": 0, "tis": 1, "mis": 2}:
        raise ValueError("mode")
    if mode in ("tis", "mis"):
        if not all(isinstance(v, (int, float)) for v in (low, high)) or not math.isfinite(low) or not math.isfinite(high):
            raise ValueError("bounds must be finite")
        if low < 0 or high < low or high <= 0:
            raise ValueError("bounds")


def _f(x, mode, lo, hi):
    if mode == "none":
        return x.new_ones(()).expand_as(x)
    if mode == "tis":
        return torch.clamp(x, min=lo, max=hi)
    return x.masked_fill(~((x >= lo) & (x <= hi)), 0.0)


def _c(tp, sp, mode, lo, hi, eps):
    lp, lq = tp.detach(), sp.detach()
    P = torch.logsumexp(lp, dim=-1).exp()
    Q = torch.logsumexp(lq, dim=-1).exp()
    tail_q = torch.clamp(1.0 - Q, min=eps)
    tail_p = torch.clamp(1.0 - P, min=eps)
    rho = tail_q / tail_p
    alpha = rho * _f(tail_p / tail_q, mode, lo, hi)
    coef = lq.exp() * _f(torch.exp(lp - lq), mode, lo, hi) - alpha[..., None] * lp.exp()
    return torch.einsum("...k,...k->...", coef, tp)


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _val(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape or train_head_logp.size(-1) < 1:
        raise ValueError("heads")
    return _c(train_head_logp, sampler_head_logp, mode, low, high, eps)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _val(mode, low, high)
    if logp.dim() != 2 or logp.shape != rollout_logp.shape or logp.shape != mask.shape:
        raise ValueError("[B, L]")
    if advantages.shape != logp.shape[:1]:
        raise ValueError("advantages [B]")
    if train_head_logp.dim() != 3 or train_head_logp.shape[:2] != logp.shape or sampler_head_logp.shape != train_head_logp.shape or train_head_logp.size(-1) < 1:
        raise ValueError("heads")
    dt = logp.dtype
    valid = mask.to(torch.bool)
    z = logp.new_zeros(())
    lp = torch.where(valid, logp, z)
    rl = torch.where(valid, rollout_logp.detach().to(dt), z)
    vk = valid[..., None]
    th = torch.where(vk, train_head_logp, torch.zeros((), dtype=train_head_logp.dtype) - 3.0)
    sh = torch.where(vk, sampler_head_logp.detach(), torch.zeros((), dtype=sampler_head_logp.dtype) - 3.0)
    adv = torch.where(valid, advantages.detach().to(dt)[:, None], z)
    w = _f(torch.exp(lp.detach() - rl), mode, low, high)
    corr = _c(th, sh, mode, low, high, eps).to(dt)
    per_tok = torch.where(valid, adv * (corr - w * lp), z)
    denom = torch.clamp(valid.sum(), min=1).to(dt)
    return torch.einsum("bl->", per_tok) / denom
