# CORRECT (style): var_mean + repeat_interleave; valid tokens gathered by nonzero/index_select, per-row sums by scatter_add (fifth probing round).
import torch
def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D, got {getattr(rewards, 'shape', None)}")
    if group_size <= 0 or rewards.shape[0] % group_size:
        raise ValueError(f"bad group_size {group_size} for N={rewards.shape[0]}")
    G = group_size
    R = rewards.reshape(-1, G)
    mean = R.mean(1)
    c = R - mean[:, None]
    out = c
    if normalize_std:
        var, _ = torch.var_mean(c, dim=1, correction=0)
        out = c / (var.sqrt() + eps).repeat_interleave(G).reshape(-1, G)
    return out.flatten()

def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"shape mismatch {tuple(logp.shape)}, {tuple(old_logp.shape)}, {tuple(mask.shape)}")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)} != ({B},)")
    flat = mask.reshape(-1) != 0
    idx = flat.nonzero().squeeze(1)
    rows = torch.div(idx, max(L, 1), rounding_mode='floor')
    lp = logp.reshape(-1).index_select(0, idx)
    olp = old_logp.detach().reshape(-1).index_select(0, idx)
    A = advantages.detach().to(logp.dtype).index_select(0, rows)
    d = lp - olp
    rd = d.detach().exp()
    lo, hi = 1.0 - clip_low, 1.0 + clip_high
    cl = rd.clamp(lo, hi) * A
    take_clip = (rd * A > cl) | torch.isnan(rd * A)
    r = torch.where(take_clip, torch.zeros_like(d), d).exp()
    tok = torch.where(take_clip, -cl + 0.0 * r, -(r * A))
    if idx.numel() == 0:   # graph-connected zero: padding may be NaN, so select, never multiply
        tok = torch.where(mask.reshape(-1) != 0, logp.reshape(-1), torch.zeros((), dtype=logp.dtype))[:1] * 0
        rows = torch.zeros(tok.shape, dtype=torch.long)
    if per_token_loss:
        return tok.sum() / max(int(idx.numel()), 1)
    per_row = torch.zeros(B, dtype=logp.dtype).scatter_add(0, rows, tok)
    cnt = torch.zeros(B, dtype=logp.dtype).scatter_add(0, rows, torch.ones_like(tok)).clamp_min(1)
    return (per_row / cnt).sum() / max(B, 1)
