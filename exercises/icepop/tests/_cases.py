"""Random cases for the icepop tier tests (loaded with ``sibling(__file__, "_cases")``).

Every case is small, ordered from small to large, mixes float32/float64, bool/float masks,
padding filled with NaN/inf/1e30, empty rows, random band bounds and non-contiguous inputs.
Ratios are kept away from the band edges and the PPO clip edges, so the float64 oracle and a
float32 implementation cannot disagree about which side of a bound a token falls.
"""

from __future__ import annotations

import math

import torch

from judge import cases as jc
from judge.testing import backward_losses as backward_all  # one backward for many losses

F32, F64 = torch.float32, torch.float64
PADS = (float("nan"), float("inf"), 1e30, float("-inf"))
SIZES = ((1, 1), (1, 3), (2, 2), (3, 1), (3, 5), (4, 4), (5, 3), (6, 7), (8, 8))


def _u(g, shape, lo, hi):
    return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=F64)


def _push_away(x: torch.Tensor, edges: list[float], gap: float = 2e-3) -> torch.Tensor:
    """Move values closer than ``gap`` to any edge (in log space) to edge + gap."""
    for e in edges:
        near = (x - e).abs() < gap
        x = torch.where(near, torch.full_like(x, e + gap), x)
    return x


def make_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, pad: float, *,
              bool_mask: bool, empty_row: bool, bounds: tuple[float, float],
              eps: tuple[float, float] = (0.2, 0.2), r_range: float = 0.45) -> dict:
    """One case: tensors (padding filled with ``pad``) and the keyword arguments. PPO
    log-ratios are uniform in [-r_range, r_range], pushed away from the clip edges 1 - eps_low
    and 1 + eps_high (where they exist: eps_low >= 1 or eps_high <= -1 has none)."""
    low, high = bounds
    old = _u(g, (B, L), -4.0, -0.5)
    log_rho = _u(g, (B, L), -1.8, 1.8)                        # rho in [0.17, 6.0]
    edges = [math.log(b) for b in (low, high) if b > 0]
    log_rho = _push_away(log_rho, edges)
    rollout = old - log_rho
    log_r = _u(g, (B, L), -r_range, r_range)                  # default: r in [0.64, 1.57]
    clip_edges = [math.log1p(-eps[0])] if eps[0] < 1 else []
    clip_edges += [math.log1p(eps[1])] if eps[1] > -1 else []
    log_r = _push_away(log_r, clip_edges + [math.log(1.28), 0.0])
    logp = old + log_r
    adv = torch.randn(B, generator=g, dtype=F64)
    m = torch.rand((B, L), generator=g, dtype=F64) < 0.75
    m[:, 0] = True
    if empty_row and B >= 2:
        m[1] = False
    pad_t = torch.tensor(pad, dtype=F64)
    logp, old, rollout = (torch.where(m, x, pad_t) for x in (logp, old, rollout))
    mask = m if bool_mask else m.to(dtype)
    return {"logp": logp.to(dtype), "old_logp": old.to(dtype), "rollout_logp": rollout.to(dtype),
            "advantages": adv.to(dtype), "mask": mask}


def cases(g: torch.Generator, random_bounds: bool = True, limit: int | None = None, start: int = 0):
    """Yield (case, bounds) pairs from small to large (the first ``limit`` sizes if given; from
    size number ``start`` on: case i is drawn as it is in the full sweep, dtype, mask, padding and
    band by its number). Cases 1, 6 ([1, 3] float32, [5, 3] float64) are non-contiguous views in
    mixed layouts, cases 2, 5 ([2, 2] float64, [4, 4] float32) have every [B, L] input
    column-major (``judge.cases.strided``): the visible and the hidden sizes each meet both, in both dtypes."""
    for i, (B, L) in enumerate(SIZES[:limit]):
        if i < start:
            continue
        dtype = F64 if i % 2 == 0 else F32
        if random_bounds and i % 3 == 2:
            low = 0.3 + 0.5 * float(torch.rand((), generator=g, dtype=F64))
            high = 1.2 + 2.0 * float(torch.rand((), generator=g, dtype=F64))
        else:
            low, high = 0.5, 2.0
        case = make_case(g, B, L, dtype, PADS[i % len(PADS)], bool_mask=(i % 2 == 1),
                         empty_row=(i >= 4 and i % 2 == 0), bounds=(low, high))
        layout = (i + i // 2) % 4  # 1: mixed non-contiguous views, 3: all column-major
        if layout in (1, 3):
            case = jc.strided(case, major=("logp", "rollout_logp"), column_major=layout == 3)
        yield case, (low, high)




def closed_form(weights, logp, old_logp, advantages, mask, *, eps_low=0.2, eps_high=0.2,
                aggregations=(True, False)):
    """{per_token_loss: (loss, d loss / d logp)} in float64 for large inputs, every aggregation
    from one vectorised pass, no autograd: the spec's per-token loss -min(r A, clip(r) A) and its
    gradient -A r where the unclipped branch is active (A > 0: r < 1 + eps_high; A < 0:
    r > 1 - eps_low), times ``weights`` (the reference's icepop_weights: its native-dtype band
    decisions). The scalar oracle's formulas, vectorised; for inputs whose PPO ratios are kept
    off the clip edges (make_case pushes them away; a tie's gradient is a convention) and finite."""
    valid = mask != 0
    zero = torch.zeros((), dtype=F64)
    w = torch.where(valid, weights.to(F64), zero)
    d = torch.where(valid, logp.to(F64) - old_logp.to(F64), zero)
    r = torch.exp(d)
    a = advantages.to(F64)[:, None]
    tok = torch.where(valid, -w * torch.minimum(r * a, r.clamp(1.0 - eps_low, 1.0 + eps_high) * a), zero)
    active = torch.where(a > 0, r < 1.0 + eps_high, (a < 0) & (r > 1.0 - eps_low))
    grad = torch.where(valid & active, -w * a * r, zero)
    out = {}
    for per_token in aggregations:
        if per_token:
            n = valid.sum().clamp(min=1).to(F64)
            out[True] = (tok.sum() / n, grad / n)
        else:
            n = valid.sum(1, keepdim=True).clamp(min=1).to(F64) * max(1, logp.shape[0])
            out[False] = ((tok / n).sum(), grad / n)
    return out
