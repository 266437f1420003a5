"""Detaches the sequence ratio inside the loss, so no gradient reaches logp.

In GSPO s_i is NOT a stop-gradient weight: the gradient flows through it (Eq. 11).

expect: T0
"""

import torch


def _check(logp, old_logp, mask, advantages=None):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D [B, L], got {tuple(logp.shape)}")
    if old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shape mismatch: logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, "
                         f"mask {tuple(mask.shape)}")
    if advantages is not None and tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)} must be ({logp.shape[0]},)")


def _log_ratio(logp, old_logp, mask):
    valid = mask.bool()
    zero = torch.zeros((), dtype=logp.dtype)
    lr = torch.where(valid, logp, zero) - torch.where(valid, old_logp.detach(), zero)
    return lr, valid


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    lr, valid = _log_ratio(logp, old_logp, mask)
    n = valid.sum(-1).to(logp.dtype)
    return torch.exp(lr.sum(-1) / n.clamp(min=1))


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask, advantages)
    s = sequence_ratio(logp, old_logp, mask).detach()
    n = mask.bool().sum(-1)
    adv = advantages.detach()
    per_seq = torch.minimum(s * adv, s.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    per_seq = torch.where(n > 0, per_seq, torch.zeros_like(per_seq))
    return -per_seq.sum() / logp.shape[0]
