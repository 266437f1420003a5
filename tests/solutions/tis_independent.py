"""An independent TIS solution (different style from the reference): masked_fill, explicit
minimum/maximum, slime-style max of negated surrogates, and an explicit loop over responses for the
seq-mean-token-mean aggregation."""

import math

import torch


def _validate(lo, hi):
    ok = isinstance(lo, (int, float)) and isinstance(hi, (int, float))
    if not ok or math.isnan(lo) or math.isnan(hi) or math.isinf(hi) or hi <= 0 or lo < 0 or lo > hi:
        raise ValueError(f"invalid truncation bounds [{lo}, {hi}]")


def _same_2d(*ts):
    s = ts[0].shape
    if len(s) != 2 or any(t.shape != s for t in ts):
        raise ValueError("shapes differ or are not 2-D: " + ", ".join(str(tuple(t.shape)) for t in ts))


def _weights(old, roll, pad, lo, hi):
    rho = (old.detach() - roll.detach()).masked_fill(pad, 0.0).exp()      # inf / 0 allowed
    w = torch.minimum(torch.maximum(rho, rho.new_full((), lo)), rho.new_full((), hi))
    return w.masked_fill(pad, 0.0)


def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _validate(clip_low, clip_high)
    _same_2d(old_logp, rollout_logp, mask)
    return _weights(old_logp, rollout_logp, mask == 0, clip_low, clip_high)


def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _validate(tis_low, tis_high)
    _same_2d(logp, old_logp, rollout_logp, mask)
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages must be [B]={logp.shape[0]}, got {tuple(advantages.shape)}")
    pad = mask == 0
    w = _weights(old_logp, rollout_logp, pad, tis_low, tis_high).to(logp.dtype)
    a = advantages.detach().to(logp.dtype).unsqueeze(1).expand_as(logp)
    log_ratio = logp.masked_fill(pad, 0.0) - old_logp.detach().masked_fill(pad, 0.0)
    # for A >= 0 a ratio above 1 + eps_high is clipped anyway: cap its log-ratio so that exp cannot
    # overflow (exp's backward at inf sends NaN even through a zero gradient)
    log_ratio = torch.where(a >= 0, log_ratio.clamp(max=math.log1p(eps_high) + 1.0), log_ratio)
    ratio = log_ratio.exp()
    # slime: pg_losses = max(-A r, -A clip(r))
    pg = torch.maximum(-a * ratio, -a * ratio.clamp(1.0 - eps_low, 1.0 + eps_high))
    tok = (pg * w).masked_fill(pad, 0.0)
    if per_token_loss:
        n = int((~pad).sum())
        return tok.sum() / max(n, 1)
    B = logp.shape[0]
    total = tok.sum() * 0.0  # keeps the graph for an empty batch
    for i in range(B):
        n_i = int((~pad[i]).sum())
        total = total + tok[i].sum() / max(n_i, 1)
    return total / max(B, 1)
