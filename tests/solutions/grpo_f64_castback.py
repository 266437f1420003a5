# CORRECT (style): the loss computed in float64 and cast back; clipping decided in the inputs dtype (as the spec says); var_mean
import torch

def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError("1-D rewards required")
    if group_size <= 0 or len(rewards) % group_size != 0:
        raise ValueError("group_size must be positive and divide N")
    G = group_size
    R = rewards.reshape(-1, G)
    var, mean = torch.var_mean(R, dim=1, correction=0, keepdim=True)
    c = R - mean
    if normalize_std:
        c = c / (var.sqrt() + eps)
    return c.reshape(-1)

def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape or advantages.shape != logp.shape[:1]:
        raise ValueError(f"bad shapes: {tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(advantages.shape)} {tuple(mask.shape)}")
    dt = logp.dtype
    m = mask.bool()
    lr = (torch.where(m, logp, 0.0).double() - torch.where(m, old_logp.detach(), 0.0).double())
    # decide clipping in the input dtype (spec: compare r in that dtype)
    r_in = torch.exp(lr.detach().to(dt))
    A_in = advantages.detach().to(dt)[:, None]
    cv = r_in.clamp(1 - clip_low, 1 + clip_high) * A_in
    pick = ~(r_in * A_in <= cv)
    A = advantages.detach().double()[:, None]
    r = torch.exp(torch.where(pick, 0.0, lr))
    tl = torch.where(pick, -cv.double(), -r * A)
    tl = torch.where(m, tl, 0.0)
    n = m.sum(-1).double()
    if per_token_loss:
        out = tl.sum() / n.sum().clamp(min=1)
    else:
        out = (tl.sum(-1) / n.clamp(min=1)).sum() / max(1, logp.shape[0])
    return out.to(dt)
