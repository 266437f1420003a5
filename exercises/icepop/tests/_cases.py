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
from judge.testing import without_defaults

F32, F64 = torch.float32, torch.float64
PADS = (float("nan"), float("inf"), 1e30, float("-inf"))
SIZES = ((1, 1), (1, 3), (2, 2), (3, 1), (3, 5), (4, 4), (5, 3), (6, 7), (8, 8))

# The spec's defaults. test_t1_oracle's keyword calls leave out every argument equal to its
# default, and the sweep is laid out so that each defaulted argument is also passed ALONE: case
# i's band (BANDS: "L"/"l" a random low below/above 0.5 with high at its default, "H"/"h" a
# random high above/below 2 with low at its default, "B" both random, "D" both defaults) and PPO
# widths (WIDTHS: one width at its default 0.2, or none) are chosen so that, for every ordered
# pair (p, q) of defaulted arguments, some keyword call gives p a non-default value with q
# omitted, in the visible sizes 0-3 and again in the hidden sizes 4-8 (visible: one width given
# x one bound given, all four combinations; hidden: both widths x D, each single width x B, and
# single widths with a single bound). per_token_loss=False is given in every seq-mean call and
# per_token_loss=True is left out of the even-numbered token-mean ones (sizes 0, 2, 4, 6, 8:
# together they give each of the four other arguments). make_case plants, for each argument
# that differs from its default, a token where the difference shows (``plants``; always room for
# them), so dropping it changes the expected values on every seed, and, where room is left, two
# tokens either side of each omitted argument's edge. A solution that reads one argument only
# when another is given too (a bound applied only with its partner), or derives an omitted one
# from another (eps_high = eps_low if eps_high is None, low = 1 / high), is off.
DEFAULTS = {"eps_low": 0.2, "eps_high": 0.2, "low": 0.5, "high": 2.0, "per_token_loss": True}
BANDS = "LLhHlDHBB"
WIDTHS = ((0.3, 0.2), (0.2, 0.28), (0.2, 0.28), (0.3, 0.2),
          (0.3, 0.2), (0.3, 0.28), (0.2, 0.28), (0.3, 0.2), (0.2, 0.28))


def given(**kw) -> dict:
    """The keyword arguments, those equal to the spec's default left out."""
    return without_defaults(kw, DEFAULTS)


def plants(bounds: tuple[float, float], eps: tuple[float, float]) -> list[tuple]:
    """Tokens (log rho or None, log r or None, sign of the row's advantage or 0), most important
    first, on which each band bound and PPO width changes the token's loss. For an argument that
    differs from its default: rho halfway (in log space) between the bound and its default
    (weight rho under one band, 0 under the other), r halfway between the clip edge and its
    default (1 - eps_low: A < 0; 1 + eps_high: A > 0) at rho = 1 (kept by any band here) or at a
    wider bound's rho (which the given band keeps). For an argument at its default (left out of
    the keyword calls): two tokens a factor e^0.05 (rho) or e^0.03 (r) either side of its edge,
    so a solution that puts any other value there (eps_high = eps_low when eps_high is omitted,
    low = 1 / high when low is) is off too."""
    (low, high), (el, eh) = bounds, eps
    d = DEFAULTS
    given_rho, given_r, brackets = [], [], []
    for k, x in (("low", low), ("high", high)):
        if x != d[k]:
            given_rho.append((math.log(x) + math.log(d[k])) / 2)
        else:
            brackets += [(math.log(x) + f, None, 0) for f in (-0.05, 0.05)]
    for k, x, sign in (("eps_low", -el, -1), ("eps_high", eh, 1)):
        edge, default_edge = math.log1p(x), math.log1p(sign * d[k])
        if x != sign * d[k]:
            given_r.append(((edge + default_edge) / 2, sign))
        else:
            brackets += [(0.0, edge + f, sign) for f in (-0.03, 0.03)]
    wider = low < d["low"] or high > d["high"]
    if len(given_rho) == 1 and wider and given_r:
        out = [(given_rho[0],) + given_r[0]] + [(0.0,) + r for r in given_r[1:]]
    else:
        out = [(x, None, 0) for x in given_rho] + [(0.0,) + r for r in given_r]
    return out + brackets


def _u(g, shape, lo, hi):
    return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=F64)


def _push_away(x: torch.Tensor, edges: list[float], gap: float = 2e-3) -> torch.Tensor:
    """Move values closer than ``gap`` to any edge (in log space) to edge + gap (the first such
    edge; edges here are either equal or far more than 2 gap apart)."""
    if len(edges) <= 2:
        for e in edges:
            near = (x - e).abs() < gap
            x = torch.where(near, torch.full_like(x, e + gap), x)
        return x
    e = torch.tensor(edges, dtype=x.dtype)      # all edges at once: a few ops, not five per edge
    near = (x.unsqueeze(-1) - e).abs() < gap
    return torch.where(near.any(-1), (e + gap)[near.to(torch.uint8).argmax(-1)], x)


def make_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, pad: float, *,
              bool_mask: bool, empty_row: bool, bounds: tuple[float, float],
              eps: tuple[float, float] = (0.2, 0.2), r_range: float = 0.45,
              plant: list[tuple] = ()) -> dict:
    """One case: tensors (padding filled with ``pad``) and the keyword arguments. PPO
    log-ratios are uniform in [-r_range, r_range], pushed away from the clip edges 1 - eps_low
    and 1 + eps_high (where they exist: eps_low >= 1 or eps_high <= -1 has none). ``plant``
    (``plants``): each token in turn takes the next valid position of a row (a row whose
    advantage has the sign it asks for, or a row not yet signed; column 0 of a non-empty row is
    always valid), and that row's advantage gets the sign (|A| >= 0.5); a token with no such
    position left is not planted."""
    low, high = bounds
    old = _u(g, (B, L), -4.0, -0.5)
    log_rho = _u(g, (B, L), -1.8, 1.8)                        # rho in [0.17, 6.0]
    edges = [math.log(b) for b in (low, high) if b > 0]
    log_rho = _push_away(log_rho, edges)
    log_r = _u(g, (B, L), -r_range, r_range)                  # default: r in [0.64, 1.57]
    clip_edges = [math.log1p(-eps[0])] if eps[0] < 1 else []
    clip_edges += [math.log1p(eps[1])] if eps[1] > -1 else []
    # ... and off test_t1_oracle's clip edges 1 - 0.3 and 1 + 0.28 (WIDTHS)
    log_r = _push_away(log_r, clip_edges + [math.log(0.7), math.log(1.28), 0.0])
    adv = torch.randn(B, generator=g, dtype=F64)
    m = torch.rand((B, L), generator=g, dtype=F64) < 0.75
    m[:, 0] = True
    if empty_row and B >= 2:
        m[1] = False
    if plant:   # positions chosen in Python, then one indexed write per tensor
        free = {i: [t for t, on in enumerate(row) if on] for i, row in enumerate(m.tolist()) if any(row)}
        signs, at = {}, []
        for lrho, lr, sign in plant:
            fits = [i for i in free if free[i] and (not sign or signs.get(i, sign) == sign)]
            if not fits:
                continue
            # a signed token prefers a row of its sign, an unsigned one a row left unsigned
            i = min(fits, key=lambda i: (i not in signs) if sign else (i in signs))
            if sign:
                signs[i] = sign
            at.append((i, free[i].pop(0), lrho, lr))
        rho_at = [(i, t, v) for i, t, v, _ in at if v is not None]
        r_at = [(i, t, v) for i, t, _, v in at if v is not None]
        vals = torch.tensor([v for *_, v in rho_at + r_at], dtype=F64)
        if rho_at:
            log_rho[[i for i, *_ in rho_at], [t for _, t, _ in rho_at]] = vals[:len(rho_at)]
        if r_at:
            log_r[[i for i, *_ in r_at], [t for _, t, _ in r_at]] = vals[len(rho_at):]
        if signs:
            adv = torch.tensor([signs[k] * (0.5 + abs(x)) if k in signs else x
                                for k, x in enumerate(adv.tolist())], dtype=F64)
    if B >= 2 and float(torch.rand((), generator=g)) < 0.4:
        # a response with advantage exactly 0 (not a planted row) still counts its tokens in the
        # token-mean's N: dropping such rows (DAPO-style filtering) changes the loss
        unsigned = [i for i in range(B) if not (plant and i in signs)]
        if unsigned:
            adv[unsigned[int(torch.randint(0, len(unsigned), (), generator=g))]] = 0.0
    rollout = old - log_rho
    logp = old + log_r
    pad_t = torch.tensor(pad, dtype=F64)
    logp, old, rollout = (torch.where(m, x, pad_t) for x in (logp, old, rollout))
    mask = m if bool_mask else m.to(dtype)
    return {"logp": logp.to(dtype), "old_logp": old.to(dtype), "rollout_logp": rollout.to(dtype),
            "advantages": adv.to(dtype), "mask": mask}


def cases(g: torch.Generator, random_bounds: bool = True, limit: int | None = None, start: int = 0,
          plant=lambda i: True):
    """Yield (case, bounds) pairs from small to large (the first ``limit`` sizes if given; from
    size number ``start`` on: case i is drawn as it is in the full sweep, dtype, mask, padding and
    band by its number; the band is BANDS[i]: one random bound with the other at its default, or
    both random, or both defaults), and where ``plant(i)`` the tokens of ``plants`` are planted
    (test_t1_oracle's keyword calls need them). Cases 1, 6 ([1, 3] float32, [5, 3] float64) are
    non-contiguous views in mixed layouts, cases 2, 5 ([2, 2] float64, [4, 4] float32) have every [B, L] input
    column-major (``judge.cases.strided``): the visible and the hidden sizes each meet both, in both dtypes."""
    for i, (B, L) in enumerate(SIZES[:limit]):
        if i < start:
            continue
        dtype = F64 if i % 2 == 0 else F32
        kind = BANDS[i] if random_bounds else "D"
        low, high = DEFAULTS["low"], DEFAULTS["high"]
        # a random bound is a factor e^0.1 ... e^0.5 off its default, below or above as BANDS
        # says ("B": a random side each): low in [0.30, 0.45] or [0.55, 0.82], high in
        # [1.21, 1.81] or [2.21, 3.30]
        u = torch.rand(4, generator=g, dtype=F64).tolist() if kind != "D" else ()
        for j, (name, wide, narrow) in enumerate((("low", "L", "l"), ("high", "H", "h"))):
            if kind in wide + narrow + "B":
                f = math.exp(0.1 + 0.4 * u[2 * j])
                widen = kind == wide or (kind == "B" and u[2 * j + 1] < 0.5)
                up = widen if name == "high" else not widen
                x = DEFAULTS[name] * (f if up else 1 / f)
                low, high = (x, high) if name == "low" else (low, x)
        eps = WIDTHS[i] if random_bounds else (DEFAULTS["eps_low"], DEFAULTS["eps_high"])
        case = make_case(g, B, L, dtype, PADS[i % len(PADS)], bool_mask=(i % 2 == 1),
                         empty_row=(i >= 4 and i % 2 == 0), bounds=(low, high),
                         plant=plants((low, high), eps) if plant(i) else ())
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
