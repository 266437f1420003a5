# CORRECT (style): valid tokens by masked_select, 1-D computation, weights put back with masked_scatter, row sums by index_add (fifth probing round).
import math
import torch

def _check_bounds(lo, hi, names):
    ok = isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo == lo and hi == hi
    if not ok or not (0 <= lo <= hi) or not math.isfinite(hi) or not hi > 0:
        raise ValueError(f"{names}: need 0 <= L <= U, U finite > 0; got {lo}, {hi}")

def _check(*ts):
    if any(t.dim() != 2 for t in ts) or len({tuple(t.shape) for t in ts}) != 1:
        raise ValueError(f"expected matching [B, L] tensors, got {[tuple(t.shape) for t in ts]}")

def _rho_w(old_v, roll_v, lo, hi):
    return torch.clamp(torch.exp(old_v - roll_v), min=lo, max=hi)

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _check(old_logp, rollout_logp, mask)
    _check_bounds(clip_low, clip_high, "clip_low/clip_high")
    v = mask != 0
    w = _rho_w(old_logp.detach().masked_select(v), rollout_logp.detach().masked_select(v), clip_low, clip_high)
    return torch.zeros_like(old_logp, memory_format=torch.contiguous_format).detach().masked_scatter(v, w)

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _check(logp, old_logp, rollout_logp, mask)
    B, L = logp.shape
    if advantages.shape != torch.Size([B]):
        raise ValueError(f"advantages must be [{B}], got {tuple(advantages.shape)}")
    _check_bounds(tis_low, tis_high, "tis_low/tis_high")
    v = mask != 0
    rows = torch.arange(B).unsqueeze(1).expand(B, L).masked_select(v)
    lp = logp.masked_select(v)
    ol = old_logp.detach().masked_select(v)
    w = _rho_w(ol, rollout_logp.detach().masked_select(v), tis_low, tis_high)
    a = advantages.detach().to(logp.dtype)[rows]
    lr = lp - ol
    r_d = lr.detach().exp()
    c = r_d.clamp(1 - eps_low, 1 + eps_high)
    pick_c = torch.where(a > 0, r_d > c, torch.where(a < 0, r_d < c, torch.zeros_like(r_d, dtype=torch.bool)))
    r = torch.exp(lr.masked_fill(pick_c, 0.0))
    ell = torch.where(pick_c, -c * a, -r * a)
    tok = w * ell
    anchor = torch.where(v, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0   # graph-connected zero
    if per_token_loss:
        return (tok.sum() + anchor) / max(int(v.sum()), 1)
    per = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, tok)
    n = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, torch.ones_like(tok)).clamp(min=1)
    return ((per / n).sum() + anchor) / max(B, 1)
