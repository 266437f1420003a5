# CORRECT: einsum reductions, float mask as weights, detached exp-branch trick via torch.where on
# the log-ratio (cap at 0 where clipped).
import math
import torch


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    if old_logp.ndim != 2 or old_logp.shape != rollout_logp.shape or old_logp.shape != mask.shape:
        raise ValueError(f"{old_logp.shape} {rollout_logp.shape} {mask.shape}")
    if not (0 <= low <= high and high > 0 and high < math.inf):
        raise ValueError("band")
    valid = mask.to(torch.bool)
    z = torch.zeros((), dtype=old_logp.dtype, device=old_logp.device)
    rho = torch.exp(torch.where(valid, old_logp, z) - torch.where(valid, rollout_logp.to(old_logp.dtype), z)).detach()
    return torch.where(valid & (low <= rho) & (rho <= high), rho, z)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    if logp.ndim != 2 or any(t.shape != logp.shape for t in (old_logp, rollout_logp, mask)):
        raise ValueError("shapes")
    B, L = logp.shape
    if advantages.shape != torch.Size([B]):
        raise ValueError("adv")
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).to(logp.dtype)
    dt = logp.dtype
    valid = mask.to(torch.bool)
    z = torch.zeros((), dtype=dt)
    lr = torch.where(valid, logp, z) - torch.where(valid, old_logp.to(dt), z).detach()
    A = advantages.detach().to(dt)
    Ab = A[:, None].expand(B, L)
    hi = 1.0 + eps_high
    dead = (Ab > 0) & (lr.detach() >= math.log(hi)) if hi > 0 else (Ab > 0)
    r = torch.exp(torch.where(dead, z, lr))
    ell = -torch.minimum(r * Ab, r.clamp(1 - eps_low, hi) * Ab)
    ell = torch.where(dead, -hi * Ab, ell)
    mf = valid.to(dt)
    tok = torch.where(valid, w * ell, z)
    if per_token_loss:
        return torch.einsum("bl,bl->", tok, mf) / mf.sum().clamp(min=1)
    per = torch.einsum("bl,bl->b", tok, mf) / mf.sum(1).clamp(min=1)
    return per.sum() / max(B, 1)
