"""Scalar-loop oracle for r3: Python floats, math.exp, loops over tokens and experts.

Inputs are assumed valid (the tests check validation separately). Returns float64 tensors.
"""

from __future__ import annotations

import math

import torch


def _sigmoid(u: float) -> float:
    if u >= 0:
        return 1.0 / (1.0 + math.exp(-u))
    z = math.exp(u)
    return z / (1.0 + z)


def _gates_row(u_row: list[float], idx_row: list[int], score_function: str) -> list[float]:
    sel = [u_row[e] for e in idx_row]
    if score_function == "softmax":
        m = max(sel)
        ex = [math.exp(v - m) for v in sel]
        z = sum(ex)
        return [v / z for v in ex]
    if score_function == "sigmoid":
        s = [_sigmoid(v) for v in sel]
        z = sum(s)
        return [v / z for v in s]
    raise ValueError(f"unknown score_function {score_function!r}")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    u = router_logits.detach().double().tolist()
    idx = expert_idx.tolist()
    out = [_gates_row(u[n], idx[n], score_function) for n in range(len(u))]
    return torch.tensor(out, dtype=torch.float64).reshape(len(u), len(idx[0]) if idx else 0)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    xs = x.detach().double().tolist()
    u = router_logits.detach().double().tolist()
    idx = expert_idx.tolist()
    w = expert_weight.detach().double().tolist()
    n_tok, d_in, d_out = len(xs), expert_weight.shape[1], expert_weight.shape[2]
    y = [[0.0] * d_out for _ in range(n_tok)]
    for n in range(n_tok):
        g = _gates_row(u[n], idx[n], score_function)
        for c, e in enumerate(idx[n]):
            for o in range(d_out):
                acc = 0.0
                for d in range(d_in):
                    acc += xs[n][d] * w[e][d][o]
                y[n][o] += g[c] * acc
    return torch.tensor(y, dtype=torch.float64).reshape(n_tok, d_out)
