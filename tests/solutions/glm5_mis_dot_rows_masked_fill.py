# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# per-row torch.dot over a Python loop, masked_fill neutralisation, stacked and summed.
import math
import torch


def _chk(logp, rollout_logp, mask, cl, ch):
    if logp.dim() != 2:
        raise ValueError("logp must be [B, L]")
    if rollout_logp.shape != logp.shape:
        raise ValueError("rollout_logp shape")
    if mask.shape != logp.shape:
        raise ValueError("mask shape")
    if not (0 < cl < 1) or not (math.isfinite(ch) and ch > 0):
        raise ValueError("widths")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _chk(logp, rollout_logp, mask, clip_low, clip_high)
    pad = mask == 0
    lr = (logp.detach().masked_fill(pad, 0) - rollout_logp.detach().masked_fill(pad, 0))
    r = lr.exp()
    inside = (r > 1 - clip_low).logical_and(r < 1 + clip_high).logical_and(~pad)
    return r.masked_fill(~inside, 0)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _chk(logp, rollout_logp, mask, clip_low, clip_high)
    B, L = logp.shape
    if advantages.shape != torch.Size([B]):
        raise ValueError("advantages must be [B]")
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    lp = logp.masked_fill(mask == 0, 0)
    total = (lp * 0).sum()   # lp is finite: a connected zero
    for b in range(B):
        total = total - advantages[b].detach().to(logp.dtype) * torch.dot(w[b], lp[b])
    return total / (mask != 0).sum().clamp_min(1).to(logp.dtype)
