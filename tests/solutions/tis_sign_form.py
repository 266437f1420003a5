# CORRECT: sign-split PPO form (A>0: A*min(r, 1+eh); A<0: A*max(r, 1-el)), log-space TIS clamp,
# masked_fill out of place, float64 accumulation.
import math
import torch

def _b(lo, hi):
    if not (hi == hi and lo == lo and math.isfinite(hi) and hi > 0 and 0 <= lo <= hi):
        raise ValueError(f"need 0 <= L <= U, U finite > 0; got {lo}, {hi}")

def _s(mask, *ts):
    for t in (mask,) + ts:
        if t.dim() != 2 or tuple(t.shape) != tuple(mask.shape):
            raise ValueError(f"shape {tuple(t.shape)} vs {tuple(mask.shape)}")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _b(clip_low, clip_high); _s(mask, old_logp, rollout_logp)
    pad = mask == 0
    d = old_logp.detach().masked_fill(pad, 0) - rollout_logp.detach().masked_fill(pad, 0)
    rho = d.exp()
    w = torch.minimum(torch.maximum(rho, torch.full_like(rho, clip_low)), torch.full_like(rho, clip_high))
    return w.masked_fill(pad, 0)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _b(tis_low, tis_high); _s(mask, logp, old_logp, rollout_logp)
    if tuple(advantages.shape) != (mask.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)} vs B={mask.shape[0]}")
    pad = mask == 0
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    A = advantages.detach().to(logp.dtype).unsqueeze(-1).expand_as(logp)
    lr = logp.masked_fill(pad, 0) - old_logp.detach().masked_fill(pad, 0)
    rd = lr.detach().exp()
    pos = A > 0
    # A > 0: clipped where r > 1+eh ; A < 0: clipped where r < 1-el ; A == 0: term 0
    clip_tok = torch.where(pos, rd > 1 + eps_high, rd < 1 - eps_low) & (A != 0)
    r = lr.masked_fill(clip_tok, 0).exp()
    bound = torch.where(pos, torch.full_like(rd, 1 + eps_high), torch.full_like(rd, 1 - eps_low))
    obj = torch.where(clip_tok, bound * A, r * A)
    tok = (-(w * obj)).masked_fill(pad, 0).double()
    if per_token_loss:
        return (tok.sum() / max(1, int((~pad).sum()))).to(logp.dtype)
    n = (~pad).sum(-1).clamp(min=1).double()
    return ((tok.sum(-1) / n).sum() / max(1, mask.shape[0])).to(logp.dtype)
