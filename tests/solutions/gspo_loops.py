# CORRECT (style): python loop over responses, boolean indexing, torch.cat (not stack) with an empty seed.
import torch


def _check(logp, old_logp, mask):
    if logp.ndim != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"bad shapes {tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(mask.shape)}")


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    out = [logp.new_ones(0) + logp.sum() * 0 if False else logp.new_zeros(0)]
    for i in range(logp.shape[0]):
        sel = mask[i] != 0
        k = int(sel.sum())
        if k == 0:
            out.append(logp.new_ones(1))
            continue
        d = logp[i][sel] - old_logp[i][sel].detach()
        out.append(torch.exp(d.sum() / k).reshape(1))
    return torch.cat(out)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    B = logp.shape[0]
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be ({B},)")
    total = torch.where(mask != 0, logp, torch.zeros_like(logp)).sum() * 0.0
    for i in range(B):
        sel = mask[i] != 0
        k = int(sel.sum())
        if k == 0:
            continue
        a = float(advantages[i])
        ml = (logp[i][sel] - old_logp[i][sel].detach()).sum() / k
        s_val = torch.exp(ml.detach())
        if (a > 0 and bool(s_val > 1 + clip_eps)) or (a < 0 and bool(s_val < 1 - clip_eps)):
            bound = (1 + clip_eps) if a > 0 else (1 - clip_eps)
            total = total + bound * a
        else:
            total = total + torch.exp(ml) * a
    return -total / max(B, 1)
