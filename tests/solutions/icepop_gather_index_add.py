"""CORRECT: gathers the valid tokens into 1-D vectors (nonzero + index), computes there, scatters the per-row sums back with index_add; the graph reaches logp through the gather."""
import math
import torch


def _chk(low, high):
    if not (math.isfinite(high) and high > 0) or not (low >= 0 and low <= high):
        raise ValueError("band")


def _shape(*ts):
    if ts[0].dim() != 2 or any(t.shape != ts[0].shape for t in ts):
        raise ValueError("shapes")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _chk(low, high)
    _shape(old_logp, rollout_logp, mask)
    idx = (mask != 0).reshape(-1).nonzero().squeeze(1)
    o = old_logp.detach().reshape(-1).index_select(0, idx)
    q = rollout_logp.detach().reshape(-1).index_select(0, idx)
    rho = torch.exp(o - q)
    w = torch.where((rho >= low) & (rho <= high), rho, torch.zeros((), dtype=rho.dtype))
    out = torch.zeros(old_logp.numel(), dtype=old_logp.dtype)
    out[idx] = w
    return out.reshape(old_logp.shape)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _chk(low, high)
    _shape(logp, old_logp, rollout_logp, mask)
    if tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError("adv")
    B, L = logp.shape
    flat = (mask != 0).reshape(-1)
    idx = flat.nonzero().squeeze(1)
    rows = torch.div(idx, max(L, 1), rounding_mode="floor")
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).reshape(-1).index_select(0, idx)
    lp = logp.reshape(-1).index_select(0, idx)
    old = old_logp.detach().reshape(-1).index_select(0, idx)
    A = advantages.detach().to(logp.dtype).index_select(0, rows)
    lr = lp - old
    big = (A > 0) & (lr.detach() > math.log1p(eps_high))
    r = torch.exp(torch.where(big, lr.detach(), lr))
    l = -torch.minimum(r * A, r.clamp(1 - eps_low, 1 + eps_high) * A) * w
    if per_token_loss:
        return l.sum() / max(1, idx.numel())
    per_row = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, l)
    n = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, torch.ones_like(l)).clamp(min=1)
    return (per_row / n).sum() / max(1, B)
