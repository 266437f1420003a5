# CORRECT (spec-literal at ties): unclipped branch active only where A>0: r < 1+eh, A<0: r > 1-el;
# otherwise the clipped constant (gradient 0). Differs from the reference only at exact ties.
import math
import torch

def _b(lo, hi):
    if not (math.isfinite(hi) and hi > 0 and 0 <= lo <= hi):
        raise ValueError(f"bounds {lo}, {hi}")

def _s(mask, *ts):
    if mask.dim() != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError("shapes")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _b(clip_low, clip_high); _s(mask, old_logp, rollout_logp)
    m = mask != 0
    z = torch.zeros((), dtype=old_logp.dtype)
    rho = torch.exp(torch.where(m, old_logp.detach() - rollout_logp.detach(), z))
    return torch.where(m, rho.clamp(clip_low, clip_high), z)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _b(tis_low, tis_high); _s(mask, logp, old_logp, rollout_logp)
    if advantages.shape != torch.Size([mask.shape[0]]):
        raise ValueError("advantages")
    m = mask != 0
    z = torch.zeros((), dtype=logp.dtype)
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    A = advantages.detach().to(logp.dtype)[:, None]
    lr = torch.where(m, logp - old_logp.detach(), z)
    rd = lr.detach().exp()
    active = torch.where(A > 0, rd < 1 + eps_high, torch.where(A < 0, rd > 1 - eps_low, torch.ones_like(m)))
    r = torch.exp(torch.where(active, lr, z))
    clipped = rd.clamp(1 - eps_low, 1 + eps_high) * A
    tok = torch.where(m, w * torch.where(active, -r * A, -clipped), z)
    N = m.sum()
    if per_token_loss:
        return tok.sum() / N.clamp(min=1).to(logp.dtype)
    return (tok.sum(1) / m.sum(1).clamp(min=1).to(logp.dtype)).sum() / max(1, mask.shape[0])
