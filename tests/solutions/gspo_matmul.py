# CORRECT (style): row sums by matmul with a ones vector, token counts in float64 (cast to logp's dtype),
# the clipped side by nested torch.where on the sign of A, 0-d bound tensors in logp's dtype.
import torch


def _shapes(logp, old_logp, mask):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D, got {tuple(logp.shape)}")
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp {tuple(old_logp.shape)} != logp {tuple(logp.shape)}")
    if mask.shape != logp.shape:
        raise ValueError(f"mask {tuple(mask.shape)} != logp {tuple(logp.shape)}")


def _log_s(logp, old_logp, mask):
    valid = mask.bool()
    zero = logp.new_zeros(())
    d = torch.where(valid, logp - old_logp.detach(), zero)
    ones = torch.ones(logp.shape[1], dtype=logp.dtype)
    cnt = valid.to(torch.float64).sum(1)
    return (d @ ones) / cnt.clamp(min=1.0).to(logp.dtype), cnt


def sequence_ratio(logp, old_logp, mask):
    _shapes(logp, old_logp, mask)
    return _log_s(logp, old_logp, mask)[0].exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _shapes(logp, old_logp, mask)
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be [B] for logp {tuple(logp.shape)}")
    ls, cnt = _log_s(logp, old_logp, mask)
    A = advantages.detach().to(logp.dtype)
    s_val = ls.detach().exp()
    hi = torch.tensor(1 + clip_eps, dtype=logp.dtype)
    lo = torch.tensor(1 - clip_eps, dtype=logp.dtype)
    off = torch.where(A > 0, s_val > hi, torch.where(A < 0, s_val < lo, torch.zeros_like(s_val, dtype=torch.bool)))
    keep = ~off & (cnt > 0)
    live = torch.exp(torch.where(keep, ls, torch.zeros_like(ls))) * A
    flat = torch.clamp(s_val, lo, hi) * A
    j = torch.where(keep, live, torch.where(off & (cnt > 0), flat, torch.zeros_like(flat)))
    return j.sum().neg() / max(logp.shape[0], 1)
