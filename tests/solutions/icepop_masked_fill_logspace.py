# CORRECT: masked_fill on copies, band tested in log space? No: band must be tested on rho in its
# dtype, so rho is formed then compared; PPO via torch.where branch selection with a detached exp
# for clipped tokens; float masks summed in logp's dtype.
import math
import torch


def _v(low, high):
    if math.isnan(low) or math.isnan(high) or low < 0 or low > high or high <= 0 or math.isinf(high):
        raise ValueError("invalid band")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    if not (old_logp.dim() == rollout_logp.dim() == mask.dim() == 2) or not (old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError("shapes")
    _v(low, high)
    pad = mask == 0
    d = old_logp.detach().masked_fill(pad, 0.0) - rollout_logp.detach().to(old_logp.dtype).masked_fill(pad, 0.0)
    rho = d.exp()
    ok = rho.ge(low).logical_and(rho.le(high)).logical_and(~pad)
    return rho.masked_fill(~ok, 0.0)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    if not (logp.dim() == old_logp.dim() == rollout_logp.dim() == mask.dim() == 2):
        raise ValueError("2-D")
    if not (logp.shape == old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError("shapes")
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError("advantages")
    _v(low, high)
    pad = mask == 0
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).to(logp.dtype)
    A = advantages.detach().to(logp.dtype).unsqueeze(1)
    lr = logp.masked_fill(pad, 0.0) - old_logp.detach().to(logp.dtype).masked_fill(pad, 0.0)
    hi = 1 + eps_high
    clipped_pos = (A > 0) & (lr.detach() > math.log(hi) if hi > 0 else torch.ones_like(lr, dtype=torch.bool))
    lr_g = lr.masked_fill(clipped_pos, 0.0)
    r = torch.where(clipped_pos, lr.detach().exp(), lr_g.exp())
    r_grad = torch.where(clipped_pos, torch.full_like(r, hi), lr_g.exp())
    unc = r_grad * A
    clp = r_grad.clamp(1 - eps_low, hi) * A
    ell = -torch.where(unc < clp, unc, clp)
    ell = torch.where(clipped_pos, -hi * A.expand_as(ell), ell)
    tok = (w * ell).masked_fill(pad, 0.0)
    if per_token_loss:
        return tok.sum() / (~pad).sum().clamp_min(1).to(logp.dtype)
    n = (~pad).sum(1).clamp_min(1).to(logp.dtype)
    B = logp.shape[0]
    return (tok.sum(1) / n).sum() / max(1, B)
