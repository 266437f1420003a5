# CORRECT (unusual): ratio and TIS formed in float64 for every input dtype, then cast to logp's dtype; loss accumulated in float64.
import torch


def _eps(eps_low, eps_high):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError(f"eps_low={eps_low}, eps_high={eps_high}")


def _same(**ts):
    shapes = {k: tuple(v.shape) for k, v in ts.items()}
    if len(set(shapes.values())) != 1 or any(len(s) != 2 for s in shapes.values()):
        raise ValueError(f"shapes {shapes}")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _eps(eps_low, eps_high)
    _same(logp=logp, anchor_logp=anchor_logp, mask=mask)
    m = mask != 0
    z = torch.zeros((), dtype=logp.dtype)
    with torch.no_grad():
        d = torch.where(m, logp.detach(), z) - torch.where(m, anchor_logp.detach().to(logp.dtype), z)
        r = torch.clamp(torch.exp(d.double()), 1 - eps_low, 1 + eps_high).to(d.dtype)
        return torch.where(m, r, z)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError(f"anchor {anchor!r}")
    if anchor == "rollout" and rollout_logp is None:
        raise ValueError("anchor='rollout' needs rollout_logp")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("rollout anchor with TIS double counts")
    if tis_enabled and rollout_logp is None:
        raise ValueError("TIS needs rollout_logp")
    _eps(eps_low, eps_high)
    named = dict(logp=logp, old_logp=old_logp, mask=mask)
    if rollout_logp is not None:
        named["rollout_logp"] = rollout_logp
    _same(**named)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    dt = logp.dtype
    m = mask != 0
    z = torch.zeros((), dtype=dt)
    anchor_logp = old_logp if anchor == "old" else rollout_logp
    w = cispo_weights(logp, anchor_logp, mask, eps_low, eps_high)
    if tis_enabled:
        with torch.no_grad():
            d = torch.where(m, old_logp.detach().to(dt), z) - torch.where(m, rollout_logp.detach().to(dt), z)
            tau = torch.where(m, torch.clamp(torch.exp(d), 0, 2), z)
    else:
        tau = torch.ones((), dtype=dt)
    A = advantages.detach().to(dt)[:, None]
    lp = torch.where(m, logp, z)
    tok = torch.where(m, w * tau * A * lp, z)
    return (-tok.double().sum() / m.sum().clamp(min=1).double()).to(dt)
