# CORRECT (style): r*A formed in log-space as sign(A) * exp(log_ratio + log|A|); std via var(correction=0)
import torch

def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError("rewards must be 1-D")
    if group_size <= 0 or rewards.shape[0] % group_size != 0:
        raise ValueError("group_size must be positive and divide N")
    R = rewards.reshape(-1, group_size)
    c = R - R.mean(dim=1, keepdim=True)
    if normalize_std:
        c = c / (c.var(dim=1, correction=0, keepdim=True).sqrt() + eps)
    return c.reshape(-1)

def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes: logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)}")
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)} vs B={logp.shape[0]}")
    m = mask.bool()
    lr = torch.where(m, logp, 0.0) - torch.where(m, old_logp, 0.0).detach()
    A = advantages.detach().to(logp.dtype).unsqueeze(1).expand_as(lr)
    with torch.no_grad():
        r = lr.exp()
        clipped = ((A > 0) & (r > 1 + clip_high)) | ((A < 0) & (r < 1 - clip_low))
        cval = torch.where(A > 0, torch.full_like(r, 1 + clip_high), torch.full_like(r, 1 - clip_low)) * A
    sgn = torch.sign(A)
    logabs = torch.log(A.abs())          # -inf where A == 0: exp(-inf) = 0
    safe = torch.where(clipped | (A == 0), torch.zeros_like(lr), lr + logabs)
    rA = torch.where(A == 0, torch.zeros_like(lr) * safe, sgn * torch.exp(safe))
    tl = torch.where(clipped, -cval, -rA)
    tl = torch.where(m, tl, torch.zeros_like(tl))
    n = m.sum(1)
    if per_token_loss:
        return tl.sum() / n.sum().clamp(min=1)
    return (tl.sum(1) / n.clamp(min=1)).sum() / max(1, logp.shape[0])
