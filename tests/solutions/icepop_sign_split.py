"""CORRECT: the PPO term split by the sign of A, -A min(r, 1 + eps_high) for A > 0 and -A max(r, 1 - eps_low) for A < 0 (0 for A = 0), with masked_fill neutralisation; ratios whose exp overflows take a detached exp."""
import math
import torch

def _validate(low, high):
    if math.isnan(low) or math.isnan(high) or low < 0 or low > high or high <= 0 or math.isinf(high):
        raise ValueError("band")

def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _validate(low, high)
    if not (old_logp.ndim == rollout_logp.ndim == mask.ndim == 2) or not (old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError("shape")
    keep = mask > 0 if mask.dtype != torch.bool else mask
    lr = old_logp.detach().masked_fill(~keep, 0) - rollout_logp.detach().masked_fill(~keep, 0)
    rho = lr.exp()
    sel = keep & rho.ge(low) & rho.le(high)
    return rho.masked_fill(~sel, 0)

def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _validate(low, high)
    if not (logp.ndim == 2 and logp.shape == old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError("shape")
    if advantages.shape != logp.shape[:1]:
        raise ValueError("adv")
    keep = mask > 0 if mask.dtype != torch.bool else mask
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)
    lr = logp.masked_fill(~keep, 0) - old_logp.detach().masked_fill(~keep, 0)
    ovf = ~torch.isfinite(lr.detach().exp())
    r = torch.where(ovf, lr.detach().exp(), lr.masked_fill(ovf, 0).exp())
    pos = torch.minimum(r, torch.full_like(r, 1 + eps_high))
    neg = torch.maximum(r, torch.full_like(r, 1 - eps_low))
    surr = torch.where(A > 0, pos, neg)
    tok = -(A * surr)
    tok = torch.where(A == 0, torch.zeros_like(tok), tok)
    contrib = torch.where(keep, w * tok, 0)
    cnt = keep.sum(-1).to(logp.dtype)
    if per_token_loss:
        return contrib.sum() / torch.clamp(cnt.sum(), min=1)
    if logp.shape[0] == 0:
        return contrib.sum()
    return torch.mean(contrib.sum(-1) / torch.clamp(cnt, min=1))
