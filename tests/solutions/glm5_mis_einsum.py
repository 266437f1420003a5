# CORRECT: masked_fill (out of place) + einsum contraction.
import math
import torch

def _check(a, b, m, lo, hi):
    if a.dim() != 2: raise ValueError(f"logp {tuple(a.shape)} not 2-D")
    for name, x in (("rollout_logp", b), ("mask", m)):
        if x.shape != a.shape: raise ValueError(f"{name} {tuple(x.shape)} != {tuple(a.shape)}")
    if math.isnan(lo) or lo <= 0 or lo >= 1: raise ValueError(f"clip_low={lo}")
    if math.isnan(hi) or math.isinf(hi) or hi <= 0: raise ValueError(f"clip_high={hi}")

def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    pad = ~mask.to(torch.bool)
    d = logp.detach().masked_fill(pad, 0.0) - rollout_logp.detach().masked_fill(pad, 0.0)
    r = d.exp()
    out = r.masked_fill(pad | ~(r > 1 - clip_low) | ~(r < 1 + clip_high), 0.0)
    return out

def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    if tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    pad = ~mask.to(torch.bool)
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    lp = logp.masked_fill(pad, 0.0)
    A = advantages.detach().to(logp.dtype)
    s = torch.einsum('bt,b,bt->', w, A, lp)
    N = (~pad).sum().clamp(min=1).to(logp.dtype)
    return -s / N
