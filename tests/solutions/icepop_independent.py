"""An independent IcePop solution (different style from the reference): masked_fill, a 0/1 band
mask turned into a selection with masked_fill (never rho * indicator), slime-style max of negated
surrogates, and an explicit loop over responses for the seq-mean-token-mean aggregation."""

import math

import torch


def _validate(lo, hi):
    if math.isnan(lo) or math.isnan(hi) or math.isinf(hi) or hi <= 0 or lo < 0 or lo > hi:
        raise ValueError(f"invalid IcePop band [{lo}, {hi}]")


def _same_2d(*ts):
    s = ts[0].shape
    if len(s) != 2 or any(t.shape != s for t in ts):
        raise ValueError("shapes differ or are not 2-D: " + ", ".join(str(tuple(t.shape)) for t in ts))


def _weights(old, roll, pad, lo, hi):
    rho = (old.detach() - roll.detach()).masked_fill(pad, 0.0).exp()      # inf / 0 allowed
    outside = (rho < lo) | (rho > hi) | pad                                # inf > hi is outside
    return rho.masked_fill(outside, 0.0)


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _validate(low, high)
    _same_2d(old_logp, rollout_logp, mask)
    return _weights(old_logp, rollout_logp, mask == 0, low, high)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _validate(low, high)
    _same_2d(logp, old_logp, rollout_logp, mask)
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages must be [B]={logp.shape[0]}, got {tuple(advantages.shape)}")
    pad = mask == 0
    w = _weights(old_logp, rollout_logp, pad, low, high).to(logp.dtype)
    a = advantages.detach().to(logp.dtype).unsqueeze(1).expand_as(logp)
    log_r = logp.masked_fill(pad, 0.0) - old_logp.detach().masked_fill(pad, 0.0)
    # A > 0 tokens above 1 + eps_high are clipped (gradient 0): cap their log-ratio so that an
    # overflowing exp never reaches the backward pass (0 * inf = NaN)
    cap = torch.full_like(log_r, math.log1p(eps_high) if eps_high > -1 else math.inf)
    ratio = torch.where(a > 0, torch.minimum(log_r, cap), log_r).exp()
    pg = torch.maximum(-a * ratio, -a * ratio.clamp(1.0 - eps_low, 1.0 + eps_high))
    tok = (pg * w).masked_fill(pad, 0.0)
    if per_token_loss:
        return tok.sum() / max(int((~pad).sum()), 1)
    B = logp.shape[0]
    total = tok.sum() * 0.0  # keeps the graph for an empty batch
    for i in range(B):
        total = total + tok[i].sum() / max(int((~pad[i]).sum()), 1)
    return total / max(B, 1)
