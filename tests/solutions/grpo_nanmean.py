# CORRECT (unusual style): NaN-masking + torch.nanmean / nansum for the aggregations, torch.std(correction=0).
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.ndim != 1:
        raise ValueError("rewards must be 1-D, got %r" % (tuple(rewards.shape) if isinstance(rewards, torch.Tensor) else rewards,))
    if group_size <= 0:
        raise ValueError("group_size must be > 0, got %d" % group_size)
    if len(rewards) % group_size:
        raise ValueError("len(rewards)=%d not divisible by group_size=%d" % (len(rewards), group_size))
    x = rewards.unflatten(0, (-1, group_size))
    c = x - x.mean(-1, keepdim=True)
    if normalize_std:
        c = c / (torch.std(x, dim=-1, keepdim=True, correction=0) + eps)
    return c.flatten()


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"expected [B, L] logp/old_logp/mask, got {tuple(logp.shape)}, {tuple(old_logp.shape)}, {tuple(mask.shape)}")
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages must be {tuple(logp.shape[:1])}, got {tuple(advantages.shape)}")
    valid = mask.to(torch.bool)
    nan = torch.tensor(float("nan"), dtype=logp.dtype)
    z = torch.tensor(0.0, dtype=logp.dtype)
    lr = torch.where(valid, logp, z) - torch.where(valid, old_logp, z).detach()
    a = advantages.to(logp.dtype).detach()[:, None]
    with torch.no_grad():
        r = lr.exp()
        up = (a > 0) & (r > 1 + clip_high)
        down = (a < 0) & (r < 1 - clip_low)
    ratio = torch.where(up | down, z, lr).exp()
    tok = torch.where(up, -(1 + clip_high) * a, torch.where(down, -(1 - clip_low) * a, -ratio * a))
    tok_nan = torch.where(valid, tok, nan)
    graph_zero = torch.where(valid, logp, z).sum() * 0
    if per_token_loss:
        if not bool(valid.any()):
            return graph_zero
        return torch.nanmean(tok_nan) + graph_zero
    B = logp.shape[0]
    if B == 0:
        return graph_zero
    per_row = torch.nanmean(tok_nan, dim=1).nan_to_num(0.0)
    return per_row.sum() / B + graph_zero
