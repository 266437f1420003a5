# CORRECT (unusual style): GSPO-token straight-through ratio s_it = sg(s_i) * exp(logp - sg(logp)),
# per-token clip via torch.where, per-row token mean, then mean over ALL B (empty rows add 0).
import torch


def sequence_ratio(logp, old_logp, mask):
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes logp={list(logp.shape)} old_logp={list(old_logp.shape)} mask={list(mask.shape)}")
    pad = ~mask.bool()
    lr = logp.masked_fill(pad, 0) - old_logp.detach().masked_fill(pad, 0)
    n = (~pad).sum(-1).clamp(min=1)
    return torch.exp(lr.sum(-1) / n)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    s = sequence_ratio(logp, old_logp, mask)
    B, L = logp.shape
    if advantages.dim() != 1 or advantages.size(0) != B:
        raise ValueError(f"advantages {list(advantages.shape)} must be [{B}]")
    pad = ~mask.bool()
    valid = ~pad
    n = valid.sum(-1)
    A = advantages.detach().to(logp.dtype)[:, None].expand(B, L)
    sd = s.detach()[:, None].expand(B, L)
    lo, hi = 1.0 - clip_eps, 1.0 + clip_eps
    clipped = valid & (((A > 0) & (sd > hi)) | ((A < 0) & (sd < lo)))
    lp = logp.masked_fill(pad | clipped, 0)
    s_tok = torch.where(clipped, sd, sd * torch.exp(lp - lp.detach()))
    term = torch.where(clipped, torch.where(A > 0, A.new_tensor(hi), A.new_tensor(lo)) * A, s_tok * A)
    term = term.masked_fill(pad, 0)
    per_row = term.sum(-1) / n.clamp(min=1).to(logp.dtype)
    return -(per_row.sum() / max(B, 1))
