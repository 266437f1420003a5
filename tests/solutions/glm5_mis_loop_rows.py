"""CORRECT (unusual style): per-row Python loop, masked_fill (out of place), denominator as a Python-free tensor max."""
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high, advantages=None):
    if not (0 < clip_low < 1) or not (clip_high > 0 and math.isfinite(clip_high)):
        raise ValueError(f"bad widths {clip_low} {clip_high}")
    if logp.ndim != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"bad shapes {logp.shape} {rollout_logp.shape} {mask.shape}")
    if advantages is not None and advantages.shape != logp.shape[:1]:
        raise ValueError(f"bad advantages {advantages.shape}")


def _row_w(lp, rlp, m, lo, hi):
    d = (lp.detach() - rlp.detach()).masked_fill(~m, 0)
    r = d.exp()
    return r.masked_fill(~(m & (r > lo) & (r < hi)), 0)


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    m = mask.to(torch.bool)
    rows = [_row_w(logp[i], rollout_logp[i], m[i], 1 - clip_low, 1 + clip_high) for i in range(logp.shape[0])]
    if not rows:
        return torch.empty_like(logp, requires_grad=False).detach()
    return torch.stack(rows).detach()


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    m = mask.to(torch.bool)
    total = logp.sum() * 0 if logp.numel() == 0 else None
    acc = []
    for i in range(logp.shape[0]):
        w = _row_w(logp[i], rollout_logp[i], m[i], 1 - clip_low, 1 + clip_high)
        a = advantages[i].detach().to(logp.dtype)
        acc.append((w * a * logp[i].masked_fill(~m[i], 0)).sum())
    if acc:
        total = torch.stack(acc).sum()
    n = torch.clamp(m.sum(), min=1).to(logp.dtype)
    return -total / n
