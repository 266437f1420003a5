"""CORRECT: clamp done in log space (exp(clamp(log rho, log L, log U))), where-chains, loops over rows for seq-mean."""
import math
import torch


def _bounds(lo, hi):
    if not (lo == lo and hi == hi and 0 <= lo <= hi and 0 < hi < math.inf):
        raise ValueError("bounds")


def _shapes(*ts):
    if any(t.dim() != 2 for t in ts) or any(t.shape != ts[0].shape for t in ts):
        raise ValueError("shapes")


def _w(old_logp, rollout_logp, valid, lo, hi):
    z = torch.zeros((), dtype=old_logp.dtype)
    d = torch.where(valid, old_logp.detach(), z) - torch.where(valid, rollout_logp.detach(), z)
    llo = math.log(lo) if lo > 0 else -math.inf
    lhi = math.log(hi)
    d = torch.clamp(d, llo, lhi)
    return torch.where(valid, torch.exp(d), z)


def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _shapes(old_logp, rollout_logp, mask)
    _bounds(clip_low, clip_high)
    return _w(old_logp, rollout_logp, mask != 0, clip_low, clip_high)


def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _shapes(logp, old_logp, rollout_logp, mask)
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError("advantages")
    _bounds(tis_low, tis_high)
    valid = mask != 0
    dt = logp.dtype
    z = torch.zeros((), dtype=dt)
    w = _w(old_logp, rollout_logp, valid, tis_low, tis_high)
    A = advantages.detach().to(dt).unsqueeze(-1)
    lr = torch.where(valid, logp, z) - torch.where(valid, old_logp.detach(), z)
    with torch.no_grad():
        rr = torch.exp(lr)
        unclipped = rr * A <= torch.clamp(rr, 1 - eps_low, 1 + eps_high) * A   # min picks r*A
    # only the tokens where the min picks r * A carry exp on the graph (an overflowing clipped
    # ratio never meets exp's backward)
    r_graph = torch.where(unclipped, torch.exp(torch.where(unclipped, lr, z)), rr)
    surr = torch.where(unclipped, r_graph * A, torch.clamp(rr, 1 - eps_low, 1 + eps_high) * A)
    tok = torch.where(valid, -w * surr, z)
    if per_token_loss:
        return tok.sum() / valid.sum().clamp(min=1).to(dt)
    total = tok.sum() * 0
    for i in range(B):
        total = total + tok[i].sum() / max(1, int(valid[i].sum()))
    return total / max(1, B)
