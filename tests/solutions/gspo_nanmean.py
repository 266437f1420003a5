# CORRECT (unusual style): NaN-masked log-ratios and torch.nanmean for the geometric mean; the
# clipped/unclipped choice via torch.minimum on a detached copy; einsum for the batch mean.
import torch


def _shapes(logp, old_logp, mask):
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"need [B, L] inputs of one shape: logp {tuple(logp.shape)}, old_logp "
                         f"{tuple(old_logp.shape)}, mask {tuple(mask.shape)}")


def _log_s(logp, old_logp, mask):
    v = mask.bool()
    nan = torch.full((), float("nan"), dtype=logp.dtype)
    zero = torch.zeros((), dtype=logp.dtype)
    d = torch.where(v, torch.where(v, logp, zero) - torch.where(v, old_logp.detach(), zero), nan)
    return torch.nanmean(d, dim=-1).nan_to_num(0.0), v.any(-1)


def sequence_ratio(logp, old_logp, mask):
    _shapes(logp, old_logp, mask)
    return _log_s(logp, old_logp, mask)[0].exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _shapes(logp, old_logp, mask)
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)} != ({logp.shape[0]},)")
    ls, nonempty = _log_s(logp, old_logp, mask)
    a = advantages.detach().to(logp.dtype)
    lo = torch.tensor(1 - clip_eps, dtype=logp.dtype)
    hi = torch.tensor(1 + clip_eps, dtype=logp.dtype)
    sd = ls.detach().exp()
    cl = torch.minimum(torch.maximum(sd, lo), hi)
    take_clip = (cl * a < sd * a) | torch.isnan(sd * a)
    s = torch.where(take_clip, torch.zeros_like(ls), ls).exp()
    J = torch.where(take_clip, cl * a, s * a)
    w = nonempty.to(logp.dtype) / max(logp.shape[0], 1)
    return -torch.einsum("b,b->", torch.where(nonempty, J, torch.zeros_like(J)), w)
