# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# the loss as a custom torch.autograd.Function with a hand-written backward (-m w A / N), in float64 inside and cast back to logp's dtype.
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes {tuple(logp.shape)} {tuple(rollout_logp.shape)} {tuple(mask.shape)}")
    if not (0 < clip_low < 1) or not (math.isfinite(clip_high) and clip_high > 0):
        raise ValueError(f"widths {clip_low} {clip_high}")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    v = mask.bool()
    z = torch.zeros((), dtype=logp.dtype)
    r = torch.exp(torch.where(v, logp.detach(), z) - torch.where(v, rollout_logp.detach(), z))
    return torch.where(v & (r > 1 - clip_low) & (r < 1 + clip_high), r, z)


class _Loss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, coef):
        # coef = m w A / N, zero at padding; logp may hold NaN at padding
        lp = torch.where(coef != 0, logp, torch.zeros((), dtype=logp.dtype))
        ctx.save_for_backward(coef)
        return -(coef.double() * lp.double()).sum().to(logp.dtype)

    @staticmethod
    def backward(ctx, g):
        (coef,) = ctx.saved_tensors
        return -g * coef, None


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    B = logp.shape[0]
    if advantages.shape != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    n = max(1, int(mask.bool().sum()))
    coef = (w * advantages.detach().to(logp.dtype)[:, None]) / n
    return _Loss.apply(logp, coef)
