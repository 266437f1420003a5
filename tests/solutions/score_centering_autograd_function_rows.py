# CORRECT: custom autograd.Function for the correction, per-row python loop for the loss
import math
import torch

MODES = ("none", "tis", "mis")


def _check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high and high > 0.0):
            raise ValueError("bad bounds")


def _check_loss_shapes(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shapes")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError("advantages")
    if train_head_logp.dim() != 3 or tuple(train_head_logp.shape[:2]) != (B, L) or sampler_head_logp.shape != train_head_logp.shape:
        raise ValueError("heads")


def _f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def _coef(lp, lq, mode, low, high, eps):
    p, q = lp.exp(), lq.exp()
    rho = (1 - q.sum(-1)).clamp(min=eps) / (1 - p.sum(-1)).clamp(min=eps)
    alpha = rho * _f(1.0 / rho, mode, low, high)
    return q * _f(torch.exp(lp - lq), mode, low, high) - alpha.unsqueeze(-1) * p


class _Corr(torch.autograd.Function):
    @staticmethod
    def forward(ctx, th, sh, mode, low, high, eps):
        coef = _coef(th, sh, mode, low, high, eps)
        ctx.save_for_backward(coef)
        return (coef * th).sum(-1)

    @staticmethod
    def backward(ctx, g):
        (coef,) = ctx.saved_tensors
        return g.unsqueeze(-1) * coef, None, None, None, None, None


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("heads")
    return _Corr.apply(train_head_logp, sampler_head_logp.detach(), mode, low, high, eps)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    _check_mode(mode, low, high)
    _check_loss_shapes(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    B, L = logp.shape
    m = mask.bool()
    total = torch.zeros((), dtype=logp.dtype) + (torch.where(m, logp, 0.0).sum() * 0.0)
    total = total + torch.where(m.unsqueeze(-1), train_head_logp, 0.0).sum() * 0.0
    for b in range(B):
        row = m[b]
        if not bool(row.any()):
            continue
        lp = logp[b][row]
        lr = rollout_logp[b][row].detach()
        w = _f(torch.exp(lp.detach() - lr), mode, low, high)
        c = sc_correction(train_head_logp[b][row], sampler_head_logp[b][row], mode, low, high, eps)
        A = advantages[b].detach().to(logp.dtype)
        total = total + (-A * w * lp + A * c).sum()
    n = int(m.sum())
    return total / max(1, n)
