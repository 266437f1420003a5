"""CORRECT (unusual style): branch decisions in the native dtype, values accumulated in float64 with einsum, cast back."""
import math
import torch


def _check(lo, hi, *ts, mask, adv=None):
    if not (hi > 0 and hi != math.inf) or not (lo >= 0 and lo <= hi):
        raise ValueError(f"bounds ({lo}, {hi})")
    if mask.ndim != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError(f"shapes {[t.shape for t in ts]} vs {mask.shape}")
    if adv is not None and adv.shape != mask.shape[:1]:
        raise ValueError(f"advantages {adv.shape}")


def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _check(clip_low, clip_high, old_logp, rollout_logp, mask=mask)
    v = mask != 0
    with torch.no_grad():
        d = torch.where(v, old_logp, 0.0) - torch.where(v, rollout_logp, 0.0)
        return torch.where(v, torch.exp(d).clamp(clip_low, clip_high), torch.zeros_like(d))


def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _check(tis_low, tis_high, logp, old_logp, rollout_logp, mask=mask, adv=advantages)
    v = mask != 0
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    a = advantages.detach().to(logp.dtype)
    lr = torch.where(v, logp, 0.0) - torch.where(v, old_logp.detach(), 0.0)
    with torch.no_grad():
        rd = lr.exp()
        cr = rd.clamp(1 - eps_low, 1 + eps_high)
        clip_binds = ~(rd * a[:, None] <= cr * a[:, None])
    r = torch.where(clip_binds, 0.0, lr).exp()
    surrogate = torch.where(clip_binds, cr, r).double()          # the chosen ratio, [B, L]
    coef = torch.where(v, w, 0.0).double()
    if per_token_loss:
        n = max(1, int(v.sum()))
        out = -torch.einsum('bt,bt,b->', coef, surrogate, a.double()) / n
    else:
        n_i = v.sum(1).clamp(min=1).double()
        out = -torch.einsum('bt,bt,b,b->', coef, surrogate, a.double(), 1 / n_i) / max(1, v.shape[0])
    return out.to(logp.dtype)
