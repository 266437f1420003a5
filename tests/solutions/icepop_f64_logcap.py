"""CORRECT: float64 inside (masked_fill, log1p cap of the log-ratio for A > 0, torch.maximum of negated surrogates), cast back to logp's dtype."""
import math
import torch


def _chk(low, high):
    if math.isnan(low) or math.isnan(high) or not math.isfinite(high) or high <= 0 or low < 0 or low > high:
        raise ValueError("band")


def _shp(mask, *ts):
    if mask.ndim != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError("shape")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _chk(low, high)
    _shp(mask, old_logp, rollout_logp)
    v = mask.bool()
    d = (old_logp.detach() - rollout_logp.detach()).masked_fill(~v, 0.0)
    rho = d.exp()
    ok = v.logical_and(rho.ge(low)).logical_and(rho.le(high))
    return rho.masked_fill(~ok, 0.0)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _chk(low, high)
    _shp(mask, logp, old_logp, rollout_logp)
    if advantages.ndim != 1 or advantages.shape[0] != mask.shape[0]:
        raise ValueError("adv")
    v = mask.bool()
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).double()
    A = advantages.detach().double().unsqueeze(1).expand_as(w)
    lr = (logp.double() - old_logp.detach().double()).masked_fill(~v, 0.0)
    hi = math.log1p(eps_high)
    lr = torch.where((A > 0) & (lr.detach() > hi), torch.full_like(lr, hi), lr)
    r = lr.exp()
    l = torch.maximum(-r * A, -r.clamp(1 - eps_low, 1 + eps_high) * A)
    tok = (w * l).masked_fill(~v, 0.0)
    if per_token_loss:
        out = tok.sum() / max(1, int(v.sum()))
    else:
        n = v.sum(1).clamp(min=1).double()
        out = (tok.sum(1) / n).mean() if v.shape[0] else tok.sum()
    return out.to(logp.dtype)
