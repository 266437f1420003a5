# CORRECT (style): einsum for the masked sum, float64 accumulation of the mean log-ratio (cast back to
# logp's dtype before exp and the comparison), clip decision via torch.clamp equality.
import torch


def _check(logp, old_logp, mask):
    if logp.dim() != 2:
        raise ValueError(f"logp {tuple(logp.shape)} is not 2-D")
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp {tuple(old_logp.shape)} vs logp {tuple(logp.shape)}")
    if mask.shape != logp.shape:
        raise ValueError(f"mask {tuple(mask.shape)} vs logp {tuple(logp.shape)}")


def _mlr(logp, old_logp, mask):
    v = mask != 0
    d = torch.where(v, logp, torch.zeros_like(logp)) - torch.where(v, old_logp, torch.zeros_like(old_logp)).detach()
    w = v.to(torch.float64)
    tot = torch.einsum("bl,bl->b", d.double(), w)
    n = w.sum(1)
    return (tot / n.clamp(min=1.0)).to(logp.dtype), n > 0


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    return _mlr(logp, old_logp, mask)[0].exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    B = logp.shape[0]
    if advantages.dim() != 1 or advantages.numel() != B:
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    mlr, nonempty = _mlr(logp, old_logp, mask)
    A = advantages.detach().to(logp.dtype)
    with torch.no_grad():
        s = mlr.exp()
        c = s.clamp(1 - clip_eps, 1 + clip_eps)
        clipped = (c * A) < (s * A)        # the min picks the clipped term strictly (inf*A>0 included)
    s_live = torch.where(clipped, torch.zeros_like(mlr), mlr).exp()
    J = torch.where(clipped, c * A, s_live * A)
    J = torch.where(nonempty, J, torch.zeros_like(J))
    return -(J.sum() / max(B, 1))
