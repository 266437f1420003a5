# CORRECT: chunked over L (chunks of 3), float64 accumulation for float64 only, index_select style mask
import torch

def _checks(lo, hi):
    if not (lo >= 0.0): raise ValueError("eps_low")
    if not (hi > 0.0): raise ValueError("eps_high")

def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _checks(eps_low, eps_high)
    if len(logp.shape) != 2 or tuple(anchor_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError("shapes")
    B, L = logp.shape
    out = logp.new_zeros((B, L))
    v = mask.to(torch.bool)
    for s in range(0, L, 3):
        sl = slice(s, s + 3)
        vv = v[:, sl]
        a = logp[:, sl].detach(); b = anchor_logp[:, sl].detach()
        r = torch.exp(torch.where(vv, a, torch.zeros_like(a)) - torch.where(vv, b, torch.zeros_like(b)))
        out[:, sl] = torch.where(vv, r.clamp(min=1 - eps_low, max=1 + eps_high), torch.zeros_like(r))
    return out.detach()

def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"): raise ValueError("anchor")
    if anchor == "rollout" and rollout_logp is None: raise ValueError("rollout_logp")
    if anchor == "rollout" and tis_enabled: raise ValueError("tis+rollout")
    if tis_enabled and rollout_logp is None: raise ValueError("tis")
    _checks(eps_low, eps_high)
    shp = tuple(logp.shape)
    if len(shp) != 2 or tuple(old_logp.shape) != shp or tuple(mask.shape) != shp: raise ValueError("shape")
    if rollout_logp is not None and tuple(rollout_logp.shape) != shp: raise ValueError("shape")
    if tuple(advantages.shape) != shp[:1]: raise ValueError("adv")
    B, L = shp
    v = mask.to(torch.bool)
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    A = advantages.detach().to(logp.dtype).reshape(B, 1)
    total = logp.new_zeros(())
    if L == 0 or B == 0:
        total = total + (logp * 0).sum()
    for s in range(0, L, 3):
        sl = slice(s, s + 3)
        vv = v[:, sl]
        c = w[:, sl] * A
        if tis_enabled:
            o = old_logp[:, sl].detach(); r = rollout_logp[:, sl].detach()
            z = torch.zeros_like(o)
            c = c * torch.where(vv, torch.exp(torch.where(vv, o, z) - torch.where(vv, r, z)).clamp(0.0, 2.0), z)
        lp = torch.where(vv, logp[:, sl], torch.zeros_like(logp[:, sl]))
        total = total + (c * lp).sum()
    n = int(v.sum().item())
    return -total / (n if n > 0 else 1)
