# CORRECT: seq-mean via nansum of sum/n_i (0/0 rows skipped); padding where keeps grads clean.
import math
import torch


def _bounds(lo, hi):
    if not (math.isfinite(hi) and hi > 0):
        raise ValueError(f"upper bound {hi}")
    if not (0 <= lo <= hi):
        raise ValueError(f"bounds {lo} {hi}")


def _shapes(mask, *ts):
    for t in ts:
        if t.dim() != 2 or t.shape != mask.shape:
            raise ValueError(f"shape {tuple(t.shape)} vs mask {tuple(mask.shape)}")
    if mask.dim() != 2:
        raise ValueError(f"mask {tuple(mask.shape)}")


def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _bounds(clip_low, clip_high)
    _shapes(mask, old_logp, rollout_logp)
    m = mask.bool()
    z = torch.zeros_like(old_logp)
    d = torch.where(m, old_logp.detach(), z) - torch.where(m, rollout_logp.detach(), z)
    rho = torch.exp(d)
    w = rho.clamp(clip_low, clip_high)
    return torch.where(m, w, z).detach()


def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _bounds(tis_low, tis_high)
    _shapes(mask, logp, old_logp, rollout_logp)
    B = logp.shape[0]
    if advantages.shape != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    m = mask.bool()
    z = torch.zeros_like(logp)
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    A = advantages.detach().to(logp.dtype)[:, None].expand_as(logp)
    lr = torch.where(m, logp, z) - torch.where(m, old_logp.detach(), z)
    with torch.no_grad():
        rd = torch.exp(lr)
        cl = rd.clamp(1 - eps_low, 1 + eps_high) * A
        use_clip = ~(rd * A <= cl)
    r = torch.exp(torch.where(use_clip, z, lr))
    tok = torch.where(use_clip, -cl, -r * A)
    tok = torch.where(m, w * tok, z)
    if per_token_loss:
        return tok.sum() / max(1, int(m.sum()))
    n = m.sum(1).clamp(min=1).to(logp.dtype)
    n0 = m.sum(1).to(logp.dtype)
    return torch.nansum(tok.sum(1) / n0) / max(1, B)
