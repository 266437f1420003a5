"""Scalar-loop oracle for score centering: Python floats, math.exp/math.log, loops over positions.

Same function names as the exercise, plus the analytic gradients the tests compare with:
`sc_coefficients` (the detached head coefficients, i.e. d c / d train_head_logp) and
`sc_policy_loss_grads` (d loss / d logp and d loss / d train_head_logp); a test that needs a value
and its gradients takes them from one loop (`sc_correction_and_coefficients`,
`sc_policy_loss_and_grads`). Results are float64.
"""

import math

import torch


def _f(x, mode, low, high):
    if mode == "none":
        return 1.0
    if mode == "tis":
        return min(max(x, low), high)
    if mode == "mis":
        return x if (low <= x <= high) else 0.0
    raise ValueError(f"unknown mode {mode!r}")


def _validate(mode, low, high):
    if mode not in ("none", "tis", "mis"):
        raise ValueError(f"unknown mode {mode!r}")
    if mode != "none" and not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high and high > 0):
        raise ValueError("bad bounds")


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _coefficients_row(lp, lq, mode, low, high, eps):
    """lp, lq: lists of k Python floats -> list of k coefficients sg(q w - alpha' p)."""
    p = [_exp(v) for v in lp]
    q = [_exp(v) for v in lq]
    P = 0.0
    Q = 0.0
    for v in range(len(p)):
        P += p[v]
        Q += q[v]
    rho = max(1.0 - Q, eps) / max(1.0 - P, eps)
    alpha = rho * _f(1.0 / rho, mode, low, high)
    out = []
    for v in range(len(p)):
        w = _f(_exp(lp[v] - lq[v]), mode, low, high)
        out.append(q[v] * w - alpha * p[v])
    return out


def _rows(t):
    """[..., k] -> list of rows (lists of floats) and the leading shape."""
    t = t.detach().to(torch.float64)
    lead = tuple(t.shape[:-1])
    return t.reshape(-1, t.shape[-1]).tolist(), lead


def sc_correction_and_coefficients(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0,
                                   eps=1e-6):
    """(c [...], d c / d train_head_logp = sg(q w - alpha' p) [..., k]), both float64, in one pass
    over the rows (the tests need both; each alone is below)."""
    _validate(mode, low, high)
    rows_p, lead = _rows(train_head_logp)
    rows_q, _ = _rows(sampler_head_logp)
    values, coefs = [], []
    for a, b in zip(rows_p, rows_q):
        coef = _coefficients_row(a, b, mode, low, high, eps)
        s = 0.0
        for v in range(len(a)):
            s += coef[v] * a[v]
        values.append(s)
        coefs.append(coef)
    k = train_head_logp.shape[-1]
    return (torch.tensor(values, dtype=torch.float64).reshape(lead),
            torch.tensor(coefs, dtype=torch.float64).reshape(*lead, k))


def sc_coefficients(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    return sc_correction_and_coefficients(train_head_logp, sampler_head_logp, mode, low, high, eps)[1]


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    return sc_correction_and_coefficients(train_head_logp, sampler_head_logp, mode, low, high, eps)[0]


def _loop(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask, mode, low, high, eps):
    _validate(mode, low, high)
    B, L = logp.shape
    lp = logp.detach().to(torch.float64).tolist()
    lr = rollout_logp.detach().to(torch.float64).tolist()
    hp = train_head_logp.detach().to(torch.float64).tolist()
    hq = sampler_head_logp.detach().to(torch.float64).tolist()
    A = advantages.detach().to(torch.float64).tolist()
    m = mask.detach().to(torch.float64).tolist()
    k = train_head_logp.shape[-1]
    n = 0
    for b in range(B):
        for t in range(L):
            if m[b][t] != 0:
                n += 1
    denom = float(max(1, n))
    total = 0.0
    g_logp = [[0.0] * L for _ in range(B)]
    g_head = [[[0.0] * k for _ in range(L)] for _ in range(B)]
    for b in range(B):
        for t in range(L):
            if m[b][t] == 0:
                continue
            w_a = _f(_exp(lp[b][t] - lr[b][t]), mode, low, high)
            coef = _coefficients_row(hp[b][t], hq[b][t], mode, low, high, eps)
            c = 0.0
            for v in range(k):
                c += coef[v] * hp[b][t][v]
            total += -A[b] * w_a * lp[b][t] + A[b] * c
            g_logp[b][t] = -A[b] * w_a / denom
            for v in range(k):
                g_head[b][t][v] = A[b] * coef[v] / denom
    return total / denom, g_logp, g_head


def sc_policy_loss_and_grads(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                             mode="none", low=0.0, high=2.0, eps=1e-6):
    """(loss, d loss / d logp [B, L], d loss / d train_head_logp [B, L, k]) in float64, one loop."""
    loss, g_logp, g_head = _loop(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                                 mode, low, high, eps)
    return (torch.tensor(loss, dtype=torch.float64), torch.tensor(g_logp, dtype=torch.float64),
            torch.tensor(g_head, dtype=torch.float64))


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    return sc_policy_loss_and_grads(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                                    mode, low, high, eps)[0]


def sc_policy_loss_grads(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                         mode="none", low=0.0, high=2.0, eps=1e-6):
    """(d loss / d logp [B, L], d loss / d train_head_logp [B, L, k]) in float64."""
    return sc_policy_loss_and_grads(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                                    mode, low, high, eps)[1:]
