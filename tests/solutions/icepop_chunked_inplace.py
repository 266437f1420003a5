"""CORRECT: columns in chunks of 7, einsum reductions, in-place ops (sub_, exp_, masked_fill_) on its own temporaries, A > 0 ratios above the clip taken off the graph."""
import math
import torch

def _chk(low, high):
    if not (low >= 0 and high >= low and high > 0 and math.isfinite(high)):
        raise ValueError("band")

def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _chk(low, high)
    if old_logp.dim() != 2 or old_logp.shape != rollout_logp.shape or old_logp.shape != mask.shape:
        raise ValueError("shape")
    vm = mask.bool()
    x = torch.where(vm, old_logp.detach(), 0.0).clone()
    x.sub_(torch.where(vm, rollout_logp.detach(), 0.0))
    x.exp_()
    ok = vm & (x >= low) & (x <= high)
    x.masked_fill_(~ok, 0.0)
    return x

def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _chk(low, high)
    if logp.dim() != 2 or not (logp.shape == old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError("adv")
    vm = mask.bool()
    W = icepop_weights(old_logp, rollout_logp, mask, low, high)
    A = advantages.detach().to(logp.dtype)
    vf = vm.to(logp.dtype)
    row_sums = []
    for j in range(0, L, 7):
        sl = slice(j, j + 7)
        v = vm[:, sl]
        d = torch.where(v, logp[:, sl], 0.0) - torch.where(v, old_logp[:, sl].detach(), 0.0)
        up = (A[:, None] > 0) & (d.detach() > math.log1p(eps_high))
        d = torch.where(up, d.detach(), d)
        r = d.exp()
        sur = torch.minimum(r * A[:, None], r.clamp(1 - eps_low, 1 + eps_high) * A[:, None]).neg()
        tok = torch.where(v, sur, 0.0)
        row_sums.append(torch.einsum("bl,bl->b", tok, W[:, sl]))
    tot = torch.stack(row_sums, 0).sum(0) if row_sums else torch.where(vm, logp, 0.0).sum(1)
    base = torch.where(torch.zeros_like(vm), logp, 0.0).sum()   # a graph-connected zero
    if per_token_loss:
        return base + tot.sum() / torch.einsum("bl->", vf).clamp(min=1)
    if B == 0:
        return base
    return base + torch.einsum("b,b->", tot, 1 / vf.sum(1).clamp(min=1)) / B
