"""CORRECT (unusual style): per-row loop, masked_fill (out of place), gradient split explicitly with detach arithmetic."""
import math
import torch


def _bounds(lo, hi):
    if math.isnan(lo) or math.isnan(hi) or not math.isfinite(hi) or hi <= 0 or lo < 0 or lo > hi:
        raise ValueError(f"bad bounds low={lo} high={hi}")


def _shapes(ts, mask, adv=None):
    if any(t.dim() != 2 for t in ts) or mask.dim() != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError(f"shapes {[tuple(t.shape) for t in ts]} mask {tuple(mask.shape)}")
    if adv is not None and (adv.dim() != 1 or adv.shape[0] != mask.shape[0]):
        raise ValueError(f"advantages {tuple(adv.shape)}")


def _row_w(o, q, v, lo, hi):
    rho = (o.detach() - q.detach()).masked_fill(~v, 0.0).exp()
    return rho.clamp(min=lo).clamp(max=hi).masked_fill(~v, 0.0)


def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _bounds(clip_low, clip_high)
    _shapes([old_logp, rollout_logp], mask)
    v = mask.bool()
    out = torch.zeros(old_logp.shape, dtype=old_logp.dtype)
    for i in range(old_logp.shape[0]):
        out[i] = _row_w(old_logp[i], rollout_logp[i], v[i], clip_low, clip_high)
    return out


def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _bounds(tis_low, tis_high)
    _shapes([logp, old_logp, rollout_logp], mask, advantages)
    v = mask.bool()
    B = logp.shape[0]
    sums, counts = [], []
    for i in range(B):
        vi = v[i]
        w = _row_w(old_logp[i], rollout_logp[i], vi, tis_low, tis_high)
        a = advantages[i].detach().to(logp.dtype)
        lr = (logp[i] - old_logp[i].detach()).masked_fill(~vi, 0.0)
        with torch.no_grad():
            rd = lr.exp()
            unclipped = rd * a <= rd.clamp(1 - eps_low, 1 + eps_high) * a
            const = torch.where(unclipped, torch.zeros_like(rd), -rd.clamp(1 - eps_low, 1 + eps_high) * a)
        r = lr.masked_fill(~unclipped, 0.0).exp()
        term = torch.where(unclipped, -r * a, const)
        sums.append((w * term).masked_fill(~vi, 0.0).sum())
        counts.append(int(vi.sum()))
    if B == 0:
        return logp.sum()
    s = torch.stack(sums)
    if per_token_loss:
        return s.sum() / max(1, sum(counts))
    return (s / torch.tensor([max(1, c) for c in counts], dtype=logp.dtype)).sum() / B
