"""Score centering, written independently of the reference (masked_fill, probability ratios,
explicit per-mode branches, a per-row reduction with einsum)."""

import math

import torch


def _validated(mode, low, high):
    if mode not in {"none", "tis", "mis"}:
        raise ValueError("mode must be 'none', 'tis' or 'mis', got %r" % (mode,))
    if mode == "none":
        return
    ok = all(math.isfinite(float(v)) for v in (low, high)) and low >= 0 and high > 0 and low <= high
    if not ok:
        raise ValueError("need finite 0 <= low <= high with high > 0; got low=%r high=%r" % (low, high))


def _weight(ratio, mode, low, high):
    if mode == "none":
        return torch.ones_like(ratio)
    if mode == "tis":
        return torch.minimum(torch.maximum(ratio, torch.full_like(ratio, low)), torch.full_like(ratio, high))
    outside = (ratio < low) | (ratio > high)
    return ratio.masked_fill(outside, 0.0)


def _coefficients(lp, lq, mode, low, high, eps):
    lp, lq = lp.detach(), lq.detach()
    p, q = torch.exp(lp), torch.exp(lq)
    tail_q = torch.clamp(1.0 - q.sum(dim=-1, keepdim=True), min=eps)
    tail_p = torch.clamp(1.0 - p.sum(dim=-1, keepdim=True), min=eps)
    rho = tail_q / tail_p                                   # [..., 1]
    alpha = rho * _weight(1.0 / rho, mode, low, high)
    head_w = _weight(torch.exp(lp - lq), mode, low, high)
    return q * head_w - alpha * p


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _validated(mode, low, high)
    if train_head_logp.ndim == 0 or tuple(train_head_logp.shape) != tuple(sampler_head_logp.shape):
        raise ValueError("train_head_logp %s and sampler_head_logp %s must both be [..., k]"
                         % (tuple(train_head_logp.shape), tuple(sampler_head_logp.shape)))
    coef = _coefficients(train_head_logp, sampler_head_logp, mode, low, high, eps)
    return torch.einsum("...k,...k->...", coef, train_head_logp)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _validated(mode, low, high)
    if logp.ndim != 2:
        raise ValueError("logp must be [B, L], got %s" % (tuple(logp.shape),))
    B, L = logp.shape
    for name, t in (("rollout_logp", rollout_logp), ("mask", mask)):
        if tuple(t.shape) != (B, L):
            raise ValueError("%s must be [B, L] = %s, got %s" % (name, (B, L), tuple(t.shape)))
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError("advantages must be [B] = (%d,), got %s" % (B, tuple(advantages.shape)))
    for name, t in (("train_head_logp", train_head_logp), ("sampler_head_logp", sampler_head_logp)):
        if t.ndim != 3 or t.shape[0] != B or t.shape[1] != L or t.shape[2] == 0:
            raise ValueError("%s must be [B, L, k], got %s" % (name, tuple(t.shape)))
    if train_head_logp.shape[2] != sampler_head_logp.shape[2]:
        raise ValueError("heads must have the same k")

    pad = mask == 0                                          # [B, L] True where padded
    pad3 = pad.unsqueeze(-1)
    lp = logp.masked_fill(pad, 0.0)
    lr = rollout_logp.detach().masked_fill(pad, 0.0)
    th = train_head_logp.masked_fill(pad3, -1.0)
    sh = sampler_head_logp.detach().masked_fill(pad3, -1.0)
    w_a = _weight(torch.exp(lp.detach() - lr), mode, low, high)
    c = sc_correction(th, sh, mode, low, high, eps)
    adv = advantages.detach().to(logp.dtype)[:, None].expand(B, L)  # the loss stays in logp's dtype
    token = (adv * (c - w_a * lp)).masked_fill(pad, 0.0)
    n = int((~pad).sum())
    return token.sum() / max(n, 1)
