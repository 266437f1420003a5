# CORRECT: the loss value computed without autograd; the gradient supplied by a custom
# autograd.Function (the spec's -m w A r / N on unclipped tokens, exactly 0 elsewhere).
import math, torch

def _bounds(lo, hi):
    if not (math.isfinite(hi) and hi > 0): raise ValueError("hi")
    if not (0 <= lo <= hi): raise ValueError("lo")

def _shp(mask, ts, adv=None):
    if mask.dim() != 2 or any(t.shape != mask.shape for t in ts): raise ValueError("shape")
    if adv is not None and adv.shape != mask.shape[:1]: raise ValueError("adv shape")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _bounds(clip_low, clip_high); _shp(mask, [old_logp, rollout_logp])
    v = mask.bool()
    z = torch.zeros((), dtype=old_logp.dtype)
    d = torch.where(v, old_logp.detach(), z) - torch.where(v, rollout_logp.detach(), z)
    return torch.where(v, d.exp().clamp(clip_low, clip_high), z)

class _F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, value, g):
        ctx.save_for_backward(g)
        return value.clone()
    @staticmethod
    def backward(ctx, up):
        (g,) = ctx.saved_tensors
        return up * g, None, None

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _bounds(tis_low, tis_high); _shp(mask, [logp, old_logp, rollout_logp], advantages)
    v = mask.bool()
    z = torch.zeros((), dtype=logp.dtype)
    with torch.no_grad():
        w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
        A = advantages.to(logp.dtype)[:, None]
        r = torch.exp(torch.where(v, logp, z) - torch.where(v, old_logp, z))
        c = r.clamp(1 - eps_low, 1 + eps_high)
        un = (r * A <= c * A) & v
        tok = torch.where(v, w * torch.where(un, -r * A, -c * A), z)
        gtok = torch.where(un, -w * A * r, z)
        if per_token_loss:
            n = max(1, int(v.sum()))
            val, g = tok.sum() / n, gtok / n
        else:
            B = v.shape[0]
            ni = v.sum(1).clamp(min=1).to(logp.dtype)[:, None]
            val, g = (tok / ni).sum() / max(1, B), gtok / ni / max(1, B)
    return _F.apply(logp, val, g)
