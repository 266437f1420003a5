# CORRECT (style): valid tokens by boolean indexing (logp[mask]), per-response sums and counts by
# index_add; the clipped side by torch.where on the sign of A under no_grad.
import torch


def _check(logp, old_logp, mask):
    if logp.dim() != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"need logp [B, L] with old_logp and mask of the same shape: "
                         f"{tuple(logp.shape)}, {tuple(old_logp.shape)}, {tuple(mask.shape)}")


def _mean_log_ratio(logp, old_logp, mask):
    B, L = logp.shape
    m = mask != 0
    rows = torch.arange(B).unsqueeze(1).expand(B, L)[m]
    d = logp[m] - old_logp.detach()[m]
    tot = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, d)
    n = torch.zeros(B, dtype=torch.int64).index_add(0, rows, torch.ones_like(rows))
    return tot / n.clamp(min=1), n, d


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    return _mean_log_ratio(logp, old_logp, mask)[0].exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    B = logp.shape[0]
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages must be [{B}], got {tuple(advantages.shape)}")
    ls, n, d = _mean_log_ratio(logp, old_logp, mask)
    A = advantages.detach().to(logp.dtype)
    with torch.no_grad():
        s = ls.exp()
        cut = torch.where(A > 0, s > 1 + clip_eps, s < 1 - clip_eps) & (A != 0) & (n > 0)
        const = s.clamp(1 - clip_eps, 1 + clip_eps) * A
    live = torch.exp(ls.masked_fill(cut, 0.0)) * A
    j = torch.where(cut, const, live).masked_fill(n == 0, 0.0)
    return -(j.sum() + d.sum() * 0) / max(B, 1)
