# CORRECT (style): per-response sums by torch.segment_reduce over the flattened, where-zeroed log-ratios (fifth probing round).
import torch

def _check(logp, old_logp, mask):
    if logp.dim() != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"shapes logp {tuple(logp.shape)} old {tuple(old_logp.shape)} mask {tuple(mask.shape)}")

def _seq(logp, old_logp, mask):
    m = mask.bool()
    zero = torch.zeros((), dtype=logp.dtype)
    d = torch.where(m, logp, zero) - torch.where(m, old_logp.detach(), zero)
    B, L = d.shape
    n = m.sum(1)
    if B * L:
        tot = torch.segment_reduce(d.reshape(-1), 'sum', lengths=torch.full((B,), L, dtype=torch.long))
    else:
        tot = d.sum(1)
    mean = tot / n.clamp_min(1).to(logp.dtype)
    return mean, n

def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    mean, n = _seq(logp, old_logp, mask)
    return torch.exp(mean)

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages shape {tuple(advantages.shape)} != ({B},)")
    mean, n = _seq(logp, old_logp, mask)
    A = advantages.detach().to(logp.dtype)
    with torch.no_grad():
        s0 = torch.exp(mean)
        lo, hi = 1 - clip_eps, 1 + clip_eps
        clipped = ((A > 0) & (s0 > hi)) | ((A < 0) & (s0 < lo))
    s = torch.exp(torch.where(clipped, torch.zeros_like(mean), mean))
    J = torch.where(clipped, s0.clamp(lo, hi) * A + 0 * s, s * A)
    J = torch.where(n > 0, J, torch.zeros_like(J))
    return -J.sum() / max(B, 1)
