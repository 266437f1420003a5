# CORRECT (style): per-row loop, index_select of the valid tokens, log s in float64 cast back; Python-level clip decision per row
import torch

def _chk(logp, old_logp, mask, adv=None):
    if logp.dim() != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"shapes logp {tuple(logp.shape)} old {tuple(old_logp.shape)} mask {tuple(mask.shape)}")
    if adv is not None and tuple(adv.shape) != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(adv.shape)} for B={logp.shape[0]}")

def _log_s(logp, old_logp, mask):
    m = mask != 0
    out = []
    for i in range(logp.shape[0]):
        idx = m[i].nonzero().flatten()
        d = logp[i].index_select(0, idx).double() - old_logp[i].detach().index_select(0, idx).double()
        out.append(d.sum() / max(1, idx.numel()))
    if not out:
        return logp.sum(1) * 0, m          # B = 0: an empty [0], connected to logp
    return torch.stack(out).to(logp.dtype), m

def sequence_ratio(logp, old_logp, mask):
    _chk(logp, old_logp, mask)
    ls, _ = _log_s(logp, old_logp, mask)
    return torch.exp(ls)

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _chk(logp, old_logp, mask, advantages)
    B = logp.shape[0]
    ls, m = _log_s(logp, old_logp, mask)
    total = torch.where(m, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0
    for i in range(B):
        if not bool(m[i].any()):
            continue
        a = advantages[i].detach().to(logp.dtype)
        with torch.no_grad():
            s0 = torch.exp(ls[i])
            lo, hi = 1 - clip_eps, 1 + clip_eps
            clipped = bool((a > 0 and s0 > hi) or (a < 0 and s0 < lo))
        if clipped:
            total = total + (torch.clamp(s0, lo, hi) * a)
        else:
            total = total + torch.exp(ls[i]) * a
    return -total / max(B, 1)
