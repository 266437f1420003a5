# CORRECT: the loss as a custom autograd.Function whose backward is the spec's stated gradient -m r_hat tau A / N.
import torch

def _ck(lo, hi):
    if not lo >= 0 or not hi > 0: raise ValueError("eps")

def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _ck(eps_low, eps_high)
    if logp.dim() != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape: raise ValueError("shapes")
    m = mask.bool()
    lr = torch.where(m, logp.detach(), 0.0) - torch.where(m, anchor_logp.detach(), 0.0)
    return torch.where(m, lr.exp().clamp(1 - eps_low, 1 + eps_high), 0.0).to(logp.dtype)

class _Lin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, coef, m):
        ctx.save_for_backward(coef)
        return torch.where(m, coef * torch.where(m, logp, 0.0), 0.0).sum()
    @staticmethod
    def backward(ctx, g):
        (coef,) = ctx.saved_tensors
        return g * coef, None, None

def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"): raise ValueError("anchor")
    if anchor == "rollout" and (rollout_logp is None or tis_enabled): raise ValueError("rollout")
    if tis_enabled and rollout_logp is None: raise ValueError("tis")
    _ck(eps_low, eps_high)
    ts = [old_logp, mask] + ([rollout_logp] if rollout_logp is not None else [])
    if logp.dim() != 2 or any(t.shape != logp.shape for t in ts): raise ValueError("shape")
    if advantages.shape != logp.shape[:1]: raise ValueError("adv")
    m = mask.bool()
    n = max(1, int(m.sum()))
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    if tis_enabled:
        d = torch.where(m, old_logp.detach(), 0.0) - torch.where(m, rollout_logp.detach(), 0.0)
        w = w * torch.where(m, d.exp().clamp(0, 2), 0.0).to(logp.dtype)
    coef = torch.where(m, -w * advantages.detach().to(logp.dtype)[:, None] / n, 0.0).to(logp.dtype)
    return _Lin.apply(logp, coef, m)
