"""Random cases for the tis tier tests (loaded with ``sibling(__file__, "_cases")``).

Every case is small, ordered from small to large, mixes float32/float64, bool/float masks,
padding filled with NaN/inf/1e30, empty rows and random clamp bounds. Ratios are kept away from
the clamp bounds and the PPO clip edges, so the float64 oracle and a float32 implementation
cannot disagree about which side of a bound a token falls.
"""

from __future__ import annotations

import math

import torch

from judge.testing import backward_losses as backward_all  # one backward for many losses

F32, F64 = torch.float32, torch.float64
PADS = (float("nan"), float("inf"), 1e30, float("-inf"))
SIZES = ((1, 1), (1, 3), (2, 2), (3, 1), (3, 5), (4, 4), (5, 3), (6, 7), (8, 8))
# The spec's default PPO widths, eps_low=0.2 and eps_high=0.2. The regime calls of WIDTH_OMITTED
# leave one width out (it is at this default) and give the other a non-default value, so each
# width is also passed alone (a solution that reads one width only when the other is given too,
# or derives eps_high from eps_low, is off).
DEFAULT_EPS = {"eps_low": 0.2, "eps_high": 0.2}
WIDTH_OMITTED = {4: "eps_low", 5: "eps_high", 7: "eps_low", 8: "eps_high"}


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
              eps: tuple[float, float] = (0.2, 0.2)) -> dict:
    """One case: tensors (padding filled with ``pad``) and the keyword arguments."""
    low, high = bounds
    old = _u(g, (B, L), -4.0, -0.5)
    log_rho = _u(g, (B, L), -1.8, 1.8)                        # rho in [0.17, 6.0]
    edges = [math.log(b) for b in (low, high) if b > 0]
    log_rho = _push_away(log_rho, edges)
    rollout = old - log_rho
    log_r = _u(g, (B, L), -0.45, 0.45)                        # r in [0.64, 1.57]
    log_r = _push_away(log_r, [math.log1p(-eps[0]), math.log1p(eps[1]), math.log(1.28), 0.0])
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
    bounds by its number)."""
    for i, (B, L) in enumerate(SIZES[:limit]):
        if i < start:
            continue
        dtype = F64 if i % 2 == 0 else F32
        if random_bounds and i % 3 == 2:
            low = 0.3 + 0.5 * float(torch.rand((), generator=g, dtype=F64))
            high = 1.2 + 2.0 * float(torch.rand((), generator=g, dtype=F64))
        else:
            low, high = 0.0, 2.0
        case = make_case(g, B, L, dtype, PADS[i % len(PADS)], bool_mask=(i % 2 == 1),
                         empty_row=(i >= 4 and i % 2 == 0), bounds=(low, high))
        yield case, (low, high)


def regime_case(g: torch.Generator, B: int, L: int, dtype: torch.dtype, k: int) -> tuple[dict, dict]:
    """(case, kwargs) for case number ``k`` of a run: every mask kind and padding fill in turn,
    empty rows, every default omitted in some calls, TIS bounds drawn per seed (sometimes a
    huge upper bound, where a +-20 clamp of the log-ratio as in SkyRL's safe_exp_delta shows),
    PPO widths sometimes 0 or >= 1 (used as given), each width alone in the calls of
    WIDTH_OMITTED (the other left out at its default), behaviour log-ratios of +-25 and overflowing
    ones (weight U, or L on underflow), PPO log-ratios of +-25 (ratios > 3 with A < 0: no dual
    clip) and, for A > 0 only, overflowing PPO ratios (clipped: gradient 0, never NaN), tiny
    log-probabilities (e^-110 / e^-800), float64 advantages with float32 log-probs, and
    advantages scaled by 1e3 in every fourth case (no clamp of A)."""
    from judge import cases as jc

    valid = torch.rand(B, L, generator=g) < 0.75
    if B * L:
        valid[:, 0] = True
    if B >= 2 and k % 2 == 0:
        valid[int(torch.randint(0, B, (), generator=g))] = False
    kwargs: dict = {}
    low, high, eps = 0.0, 2.0, (0.2, 0.2)
    if k % 4 != 0:
        choice = int(torch.randint(0, 3, (), generator=g))
        low, high = ((0.3 + 0.5 * float(torch.rand((), generator=g)), 1.2 + 2 * float(torch.rand((), generator=g))),
                     (0.0, 1e12), (1.0, 1.0))[choice]
        kwargs.update(tis_low=low, tis_high=high)
    if k % 3 != 0:
        widths = (0.0, 0.1, 0.2, 0.28, 1.0, 1.5)
        idx = [int(i) for i in torch.randint(0, len(widths), (2,), generator=g)]
        eps = tuple(widths[i] for i in idx)
        omit = WIDTH_OMITTED.get(k)
        if omit is not None:  # that width at its default and left out, the other not at its default
            given = widths[:2] + widths[3:]
            eps = tuple(DEFAULT_EPS[name] if name == omit else given[i % len(given)]
                        for name, i in zip(("eps_low", "eps_high"), idx))
        kwargs.update({name: e for name, e in zip(("eps_low", "eps_high"), eps) if name != omit})
    if k % 5 != 0:
        kwargs["per_token_loss"] = bool(k % 2)
    old = _u(g, (B, L), -4.0, -0.5)
    log_rho = _u(g, (B, L), -1.8, 1.8)
    log_r = _u(g, (B, L), -0.45, 0.45)
    adv = torch.randn(B, generator=g, dtype=F64)
    if k % 4 == 2:
        adv = adv * 1e3     # advantages far from unit scale are allowed: no clamp of A (e.g. to +-50)
    if B >= 2 and k % 3 == 0:  # (not the WIDTH_OMITTED cases: their rows show a dropped width)
        # a response with advantage exactly 0 still counts its tokens in the token-mean's N (and
        # in seq-mean's B): dropping such rows (DAPO-style filtering) changes the loss
        adv[k % B] = 0.0
    pick = torch.rand((B, L), generator=g, dtype=F64)
    sign = torch.where(torch.rand((B, L), generator=g) < 0.5, -1.0, 1.0).to(F64)
    over = jc.OVERFLOW_LOG_RATIOS[dtype][0]
    log_rho = torch.where(pick < 0.06, 25.0 * sign, log_rho)
    log_rho = torch.where((pick >= 0.06) & (pick < 0.1), over * sign, log_rho)
    log_r = torch.where((pick >= 0.1) & (pick < 0.16), 25.0 * sign, log_r)
    log_r = torch.where((pick >= 0.16) & (pick < 0.2) & (adv[:, None] > 0), torch.full_like(log_r, over), log_r)
    old = torch.where(pick > 0.92, old + jc.TINY_LOGP[dtype], old)
    log_rho = _push_away(log_rho, [math.log(b) for b in (low, high) if b > 0])
    log_r = _push_away(log_r, [math.log1p(-e) for e in eps[:1] if e < 1] + [math.log1p(eps[1]), 0.0])
    rollout, logp = old - log_rho, old + log_r
    fill = jc.PADS[k % len(jc.PADS)]
    logp, old, rollout = (jc.pad(x, valid, f) for x, f in ((logp, fill), (old, -fill), (rollout, fill)))
    mask = jc.as_mask(valid, jc.MASK_KINDS[k % len(jc.MASK_KINDS)])
    adv_dtype = F64 if dtype == F32 and k % 3 != 2 else dtype
    case = {"logp": logp.to(dtype), "old_logp": old.to(dtype), "rollout_logp": rollout.to(dtype),
            "advantages": adv.to(adv_dtype), "mask": mask}
    return case, kwargs
