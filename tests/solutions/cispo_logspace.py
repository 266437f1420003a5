"""CORRECT: clip in log space (log bounds, -inf for a zero lower bound), exp after; flat boolean-indexed loss with index_select of the advantages."""
import math
import torch


def _chk(eps_low, eps_high):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("bad eps")


def _same(a, *bs):
    if a.ndim != 2:
        raise ValueError("need [B, L]")
    for b in bs:
        if b.shape != a.shape:
            raise ValueError(f"{tuple(b.shape)} != {tuple(a.shape)}")


def _weights(logp, anchor_logp, valid, eps_low, eps_high):
    lo = math.log(1.0 - eps_low) if eps_low < 1.0 else -math.inf
    hi = math.log1p(eps_high)
    d = torch.where(valid, logp.detach() - anchor_logp.detach(), torch.zeros((), dtype=logp.dtype))
    r = d.exp()
    # exact bounds (exp(log(1 + eps)) may differ from 1 + eps by an ulp): clip decided in log space
    r = torch.where(d >= hi, torch.tensor(1.0 + eps_high, dtype=logp.dtype), r)
    if eps_low < 1.0:
        r = torch.where(d <= lo, torch.tensor(1.0 - eps_low, dtype=logp.dtype), r)
    r = r.clamp(1.0 - eps_low, 1.0 + eps_high)
    return torch.where(valid, r, torch.zeros((), dtype=logp.dtype))


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _chk(eps_low, eps_high)
    _same(logp, anchor_logp, mask)
    return _weights(logp, anchor_logp, mask.bool(), eps_low, eps_high)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in {"old", "rollout"}:
        raise ValueError("anchor")
    if anchor == "rollout" and rollout_logp is None:
        raise ValueError("no rollout_logp")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("tis + rollout")
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis without rollout_logp")
    _chk(eps_low, eps_high)
    _same(logp, old_logp, mask, *([rollout_logp] if rollout_logp is not None else []))
    if advantages.ndim != 1 or advantages.numel() != logp.shape[0]:
        raise ValueError("advantages [B]")
    valid = mask.bool()
    w = _weights(logp, old_logp if anchor == "old" else rollout_logp, valid, eps_low, eps_high)
    if tis_enabled:
        z = torch.zeros((), dtype=logp.dtype)
        w = w * torch.where(valid, old_logp.detach() - rollout_logp.detach(), z).exp().clamp(0, 2)
    rows = valid.nonzero(as_tuple=True)[0]
    a = advantages.detach().to(logp.dtype).index_select(0, rows)
    flat = logp[valid] * w[valid] * a
    return -flat.sum() / max(1, flat.numel())
