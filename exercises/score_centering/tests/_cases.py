"""Case generators shared by the score_centering tier tests.

Heads are built the way slime records them: a trainer distribution p = softmax(z) and a sampler
distribution q = softmax(z + noise) over a small vocabulary V; the head H is the sampler's top-k
(shuffled), and both head log-probs are the full-vocabulary log-probs at those ids.
"""

import math

import torch

from judge import cases as shared

D = torch.float64
GARBAGE = (float("nan"), float("inf"), -float("inf"), 1e30, -1e30)


def randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=D) * scale


def distributions(g, lead, V, spread=1.0, mismatch=0.7, smooth=0.0):
    """Trainer and sampler log-probs [*lead, V] (float64).

    smooth > 0 mixes both with the uniform distribution, which keeps the tail masses 1 - P_H and
    1 - Q_H away from 0: float32 cases use it, because rho = (1 - Q_H) / (1 - P_H) amplifies the
    float32 rounding of P_H by 1 / (1 - P_H) and a float32-sized tolerance would not hold.
    """
    z = randn(g, *lead, V, scale=spread)
    zq = z + randn(g, *lead, V, scale=mismatch)
    if smooth == 0.0:
        return _log_softmax(z), _log_softmax(zq)
    mix = lambda x: torch.log((1 - smooth) * _log_softmax(x).exp() + smooth / V)
    return mix(z), mix(zq)


def _log_softmax(x):
    """log-softmax over the last axis, by max-subtraction as torch.log_softmax does; written out
    because torch's kernel costs ~1 us a row for a vocabulary this small (the >= 16k-token case),
    and its forward and backward split even 3 rows over the intra-op threads, ~0.3 ms of
    thread start-up a call (the tests' differentiable log-softmax, ``log_softmax``). The max is
    detached: it cancels in the value, so the gradient is the exact g - softmax * sum(g)."""
    m = x.detach().amax(-1, keepdim=True)
    return x - m - torch.exp(x - m).sum(-1, keepdim=True).log()


log_softmax = _log_softmax


def is_rule(x, mode, low, high):
    """The IS rule f on ratios x (test-side, independent of the submission), compared in x's
    dtype: 1 for "none", the clamp for "tis", x inside the closed band and 0 outside for "mis"."""
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    return torch.where((x >= low) & (x <= high), x, torch.zeros_like(x))


def sample(g, log_q):
    """One token a ~ q per position: [*lead] int64 (inverse-CDF sampling of log_q [*lead, V])."""
    u = torch.rand(*log_q.shape[:-1], 1, generator=g, dtype=D)
    return (u > log_q.exp().cumsum(-1)).sum(-1).clamp(max=log_q.shape[-1] - 1)


def head_ids(g, log_q, k):
    """The sampler's top-k ids per position, in a random order: [*lead, k]."""
    ids = torch.topk(log_q, k, dim=-1).indices
    perm = torch.argsort(torch.rand(ids.shape, generator=g), dim=-1)
    return ids.gather(-1, perm)


def heads(g, lead, V, k, spread=1.0, mismatch=0.7, smooth=0.0):
    """(train_head_logp, sampler_head_logp, log_p, log_q, ids), all float64."""
    log_p, log_q = distributions(g, lead, V, spread, mismatch, smooth)
    ids = head_ids(g, log_q, k)
    return log_p.gather(-1, ids), log_q.gather(-1, ids), log_p, log_q, ids


def mode_and_bounds(g, i):
    """Cycle through the modes with random bounds that keep some ratios and cut others."""
    mode = ("none", "tis", "mis")[i % 3]
    u = torch.rand(2, generator=g, dtype=D).tolist()
    if mode == "tis":
        low = 0.0 if i % 2 == 0 else round(0.3 + 0.5 * u[0], 3)
        high = round(1.1 + 0.9 * u[1], 3)
    elif mode == "mis":
        low = round(0.4 + 0.45 * u[0], 3)
        high = round(1.1 + 0.8 * u[1], 3)
    else:
        low, high = 0.0, 2.0
    return mode, low, high


# spec.md's defaults, as its signatures state them (not read from the reference)
DEFAULTS = dict(mode="none", low=0.0, high=2.0, eps=1e-6)


def omit_one_bound(kw, i):
    """Keyword case i of a T1 sweep: (expected kwargs, call kwargs). In "tis" / "mis" one bound in
    turn (high for i // 6 even, low for i // 6 odd) is set to its default for the expectation and
    left out of the call, the other keeps its drawn (non-default) value: each bound is then also
    passed alone, and a solution that reads one bound only when the other is given too is off.
    ("none" ignores the bounds: nothing to omit there.)"""
    if kw["mode"] == "none":
        return kw, kw
    drop = ("high", "low")[(i // 6) % 2]
    expected = {**kw, drop: DEFAULTS[drop]}
    return expected, {key: v for key, v in expected.items() if key != drop}


def omitted_note(kw, call_kw):
    """'' or '; high omitted (default 2.0)' for a failure message."""
    gone = [key for key in kw if key not in call_kw]
    return "".join(f"; {key} omitted (default {DEFAULTS[key]!r})" for key in gone)


# (B, L, V, k, dtype): small to large; B != L and B == L; float32 and float64; a one-token head
# (k = 1) and a whole-vocabulary head (k = V).
LOSS_SIZES = [
    (1, 1, 3, 2, torch.float64),
    (2, 3, 5, 1, torch.float32),
    (3, 3, 6, 4, torch.float64),
    (3, 2, 5, 5, torch.float64),
    (4, 2, 8, 3, torch.float32),
    (4, 4, 10, 5, torch.float32),
    (5, 7, 12, 6, torch.float64),
    (8, 6, 16, 8, torch.float64),
]


def loss_case(g, B, L, V, k, dtype, i, pad=True, pool=0):
    """A batch for sc_policy_loss: dict of tensors (cast to dtype) plus mode/bounds kwargs.

    ``pool`` > 0: the positions' distributions and heads are drawn for ``pool`` prefixes and each
    position takes one at random (its token, mask and padding its own): the >= 16k-token batch,
    whose inputs would otherwise cost more than the calls it checks (``_pooled_case``)."""
    if pool:
        return pooled_case(g, B, L, V, k, dtype, i, pad, pool)[:2]
    th, sh, log_p, log_q, ids = heads(g, (B, L), V, k, smooth=smooth_for(dtype, V, k))
    # The sampled token a ~ q at each position.
    a = sample(g, log_q).unsqueeze(-1)                                        # [B, L, 1]
    logp = log_p.gather(-1, a).squeeze(-1)
    rollout = log_q.gather(-1, a).squeeze(-1)
    adv = randn(g, B)
    if B >= 2 and i % 3 == 0:
        # a response with advantage exactly 0 still counts its tokens in the token-mean's
        # denominator: dropping such rows (DAPO-style filtering) changes the loss
        adv[i % B] = 0.0
    mask = _draw_mask(g, B, L, pad)
    if pad:
        fill = GARBAGE[i % len(GARBAGE)]
        pad_m = ~mask
        logp = logp.masked_fill(pad_m, fill)
        rollout = rollout.masked_fill(pad_m, GARBAGE[(i + 1) % len(GARBAGE)])
        th = th.masked_fill(pad_m.unsqueeze(-1), fill)
        sh = sh.masked_fill(pad_m.unsqueeze(-1), GARBAGE[(i + 2) % len(GARBAGE)])
    mode, low, high = mode_and_bounds(g, i)
    if i % 4 == 1:
        mask = mask.to(dtype)  # 0/1 float masks are accepted too
    tensors = dict(logp=logp.to(dtype), rollout_logp=rollout.to(dtype), train_head_logp=th.to(dtype),
                   sampler_head_logp=sh.to(dtype), advantages=adv.to(dtype), mask=mask)
    return tensors, dict(mode=mode, low=low, high=high)


def _draw_mask(g, B, L, pad):
    if pad and B * L > 1:
        mask = torch.rand(B, L, generator=g) < 0.75
        mask[0, 0] = True
        if B >= 3:
            mask[B - 1] = False  # one empty response
        return mask
    return torch.ones(B, L, dtype=torch.bool)


def pooled_case(g, B, L, V, k, dtype, i, pad, pool):
    """``loss_case`` for ``pool`` drawn prefixes, with the same distribution of inputs and never a
    [B, L, V] tensor: (prefix, token) pairs are drawn jointly, P(j, a) = q_j(a) / pool (a uniform
    prefix, then a ~ q_j), by inverse-CDF sampling of the pool's pool * V joint masses; a padded
    position reads an extra garbage entry (the same fills as ``loss_case``'s masked_fill), so
    each input is one gather (gather, not x[idx]: CPU advanced indexing and masked_fill split
    even 2k rows over the intra-op threads, ~1 ms each when the machine is busy). Returns
    (tensors, kwargs, (pick [B, L], the pool's two heads [pool (+ 1 garbage row when padded),
    k] in dtype)): position (b, t)'s heads are row pick[b, t], so a test can evaluate the heads
    once per prefix."""
    th, sh, log_p, log_q, _ = heads(g, (pool,), V, k, smooth=smooth_for(dtype, V, k))
    cdf = log_q.exp().flatten().cumsum(0)                                     # [pool * V]
    u = torch.rand(B * L, generator=g, dtype=D) * cdf[-1]
    joint = torch.searchsorted(cdf, u, right=True).clamp_(max=pool * V - 1)   # (prefix, token)
    adv = randn(g, B)
    mask = _draw_mask(g, B, L, pad)
    flat_p, flat_q = log_p.flatten(), log_q.flatten()
    if pad:
        joint = torch.where(mask.flatten(), joint, pool * V)                  # -> the garbage entries
        flat_p = torch.cat([flat_p, torch.tensor([GARBAGE[i % len(GARBAGE)]], dtype=D)])
        flat_q = torch.cat([flat_q, torch.tensor([GARBAGE[(i + 1) % len(GARBAGE)]], dtype=D)])
        th = torch.cat([th, torch.full((1, k), GARBAGE[i % len(GARBAGE)], dtype=D)])
        sh = torch.cat([sh, torch.full((1, k), GARBAGE[(i + 2) % len(GARBAGE)], dtype=D)])
    pick = joint.div(V, rounding_mode="floor")                                # padded: row pool
    mode, low, high = mode_and_bounds(g, i)
    if i % 4 == 1:
        mask = mask.to(dtype)  # 0/1 float masks are accepted too
    th, sh = th.to(dtype), sh.to(dtype)
    rows = pick.reshape(-1, 1).expand(-1, k)
    at = lambda x: x.gather(0, rows).view(B, L, k)  # noqa: E731
    tensors = dict(logp=flat_p.to(dtype).gather(0, joint).view(B, L),
                   rollout_logp=flat_q.to(dtype).gather(0, joint).view(B, L), train_head_logp=at(th),
                   sampler_head_logp=at(sh), advantages=adv.to(dtype), mask=mask)
    return tensors, dict(mode=mode, low=low, high=high), (pick.view(B, L), th, sh)


def strided(t: dict) -> dict:
    """The same values as non-contiguous views (any [B, L] / [B] / [..., k] tensor is a valid input;
    an implementation that flattens with ``.view`` raises on these): logp, mask and
    train_head_logp with their two leading axes swapped in memory (``x.transpose(0, 1).contiguous()
    .transpose(0, 1)``, a dense layout that ``leaf``'s clone keeps), rollout_logp and
    sampler_head_logp slices of tensors twice as wide, advantages every other element of a longer
    one. Keys absent from ``t`` are skipped (``sc_correction``'s two heads)."""
    out = dict(t)
    for key in ("logp", "mask", "train_head_logp"):
        if key in t and t[key].dim() >= 2:
            out[key] = t[key].transpose(0, 1).contiguous().transpose(0, 1)
    for key in ("rollout_logp", "sampler_head_logp"):
        if key in t and t[key].dim() >= 1:
            x = t[key]
            out[key] = torch.cat([x, x], dim=-1)[..., :x.shape[-1]]
    if "advantages" in t:
        out["advantages"] = torch.stack([t["advantages"]] * 2, dim=-1)[:, 0]
    return out


def drawn_loss_sizes(g, fixed):
    """``fixed`` sizes (B, L, V, k, dtype) then six drawn per seed (judge.cases.shapes: the corners
    1 x 1, 1 x L, B x 1 and three sizes with sides up to 8; V in 2..9, k in 1..V, the dtypes in
    turn), each as (B, L, V, k, dtype, mask encoding): None keeps ``loss_case``'s own (bool, or
    0/1 float for every fourth case), the drawn ones take the encodings of judge.cases.MASK_KINDS
    in turn."""
    out = [(*size, None) for size in fixed]
    for i, (B, L) in enumerate(shared.shapes(g, max_side=8, large=False)):
        V = int(torch.randint(2, 10, (), generator=g))
        k = int(torch.randint(1, V + 1, (), generator=g))
        out.append((B, L, V, k, shared.DTYPES[i % 2], shared.MASK_KINDS[i % len(shared.MASK_KINDS)]))
    return out


# leading shape and (V, k, dtype) for sc_correction
CORRECTION_SIZES = [
    ((), 3, 2, torch.float64),
    ((2,), 4, 1, torch.float32),
    ((3,), 5, 3, torch.float64),
    ((2, 3), 6, 6, torch.float64),
    ((3, 2), 7, 4, torch.float32),
    ((4, 4), 9, 5, torch.float64),
    ((5, 6), 12, 7, torch.float32),
    ((6, 5), 16, 9, torch.float64),
]


def smooth_for(dtype, V, k):
    """Uniform mixing weight of a case: keeps float32 tail masses >= ~0.04 (none for float64)."""
    return 0.1 if dtype == torch.float32 and k < V else 0.0


def softmax_head(logits, ids):
    """Trainer head log-probs built from logits (so gradients reach the logits)."""
    return torch.log_softmax(logits, -1).gather(-1, ids)


def exact_exp(x, dtype):
    return torch.tensor(x, dtype=dtype).exp().item()


LOG2 = math.log(2.0)
