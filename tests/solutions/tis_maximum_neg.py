# CORRECT: -min written as torch.maximum(-rA, -clip(r)A) on the detached-selected ratio, einsum reduction.
import math
import torch

def _check(lo, hi, mask, ts):
    if not math.isfinite(hi) or not hi > 0 or not lo >= 0 or not lo <= hi:
        raise ValueError(f"bounds {lo} {hi}")
    if mask.dim() != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError(f"shapes {[tuple(t.shape) for t in ts]} / {tuple(mask.shape)}")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _check(clip_low, clip_high, mask, [old_logp, rollout_logp])
    v = mask.to(torch.bool)
    zero = old_logp.new_zeros(())
    with torch.no_grad():
        rho = torch.where(v, old_logp - rollout_logp, zero).exp()
        return torch.where(v, rho.clamp(min=clip_low).clamp(max=clip_high), zero)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _check(tis_low, tis_high, mask, [logp, old_logp, rollout_logp])
    if advantages.dim() != 1 or advantages.numel() != mask.shape[0]:
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    v = mask.to(torch.bool)
    zero = logp.new_zeros(())
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    A = advantages.detach().to(logp.dtype)[:, None]
    lr = torch.where(v, logp, zero) - torch.where(v, old_logp, zero).detach()
    rd = lr.detach().exp()
    neg_unc = -(rd * A)
    neg_clp = -(rd.clamp(1 - eps_low, 1 + eps_high) * A)
    take_clip = ~(neg_unc >= neg_clp)  # max(-rA, -clip A): unclipped unless strictly smaller
    r = torch.where(take_clip, zero, lr).exp()
    tok = torch.where(take_clip, neg_clp, -(r * A))
    tok = torch.where(v, tok, zero)
    if per_token_loss:
        return torch.einsum('bt,bt->', w, tok) / v.sum().clamp(min=1).to(logp.dtype)
    per_row = torch.einsum('bt,bt->b', w, tok) / v.sum(1).clamp(min=1).to(logp.dtype)
    return per_row.sum() / max(1, mask.shape[0])
