# CORRECT (style): valid tokens gathered with nonzero, per-response sums and counts by index_add on fresh buffers (fifth probing round).
import torch

def _chk(logp, old_logp, mask):
    if logp.ndim != 2:
        raise ValueError(f"logp must be [B, L], got {tuple(logp.shape)}")
    if old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"old_logp {tuple(old_logp.shape)} / mask {tuple(mask.shape)} must match logp {tuple(logp.shape)}")

def _log_s(logp, old_logp, mask):
    B, L = logp.shape
    rows, cols = (mask != 0).nonzero(as_tuple=True)
    lr = logp[rows, cols] - old_logp.detach()[rows, cols]
    tot = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, lr)
    cnt = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, torch.ones_like(lr))
    if rows.numel() == 0 and B * L:   # keep the graph: select a padded entry, then zero it
        tot = tot + torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, 0.0).sum(1)
    return tot / cnt.clamp(min=1), cnt

def sequence_ratio(logp, old_logp, mask):
    _chk(logp, old_logp, mask)
    return _log_s(logp, old_logp, mask)[0].exp()

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _chk(logp, old_logp, mask)
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages must be ({logp.shape[0]},), got {tuple(advantages.shape)}")
    ls, cnt = _log_s(logp, old_logp, mask)
    a = advantages.detach().to(logp.dtype)
    sd = ls.detach().exp()
    c = sd.clamp(1 - clip_eps, 1 + clip_eps)
    use_clip = ((a > 0) & (sd > c)) | ((a < 0) & (sd < c))
    s = torch.where(use_clip, 0.0, ls).exp()
    term = torch.where(use_clip, c * a, s * a)
    term = torch.where(cnt > 0, term, 0.0)
    if logp.shape[0] == 0:
        return -(logp.sum() * 0)
    return -term.mean()
