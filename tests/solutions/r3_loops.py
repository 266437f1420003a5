# CORRECT: python loops per token, logsumexp softmax, log-sigmoid for sigmoid
import math
import torch


def _validate(u, idx, sf):
    if not isinstance(sf, str) or sf not in ("softmax", "sigmoid"):
        raise ValueError("bad score_function")
    if not isinstance(idx, torch.Tensor) or idx.dtype in (torch.bool,) or idx.dtype.is_floating_point or idx.dtype.is_complex:
        raise ValueError("ids must be integer")
    if u.ndim != 2 or idx.ndim != 2 or u.shape[0] != idx.shape[0]:
        raise ValueError("shape")
    E = u.shape[1]
    k = idx.shape[1]
    if not (1 <= k <= E):
        raise ValueError("k")
    for row in idx.tolist():
        if len(set(row)) != len(row):
            raise ValueError("dup")
        for e in row:
            if e < 0 or e >= E:
                raise ValueError("range")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _validate(router_logits, expert_idx, score_function)
    N, k = expert_idx.shape
    rows = []
    for n in range(N):
        sel = torch.stack([router_logits[n, int(e)] for e in expert_idx[n].tolist()])
        if score_function == "softmax":
            rows.append(torch.exp(sel - torch.logsumexp(sel, 0)))
        else:
            ls = torch.nn.functional.logsigmoid(sel)
            rows.append(torch.exp(ls - torch.logsumexp(ls, 0)))
    if N == 0:
        return router_logits.new_zeros((0, k)) + router_logits.sum() * 0
    return torch.stack(rows)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    _validate(router_logits, expert_idx, score_function)
    if x.ndim != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x")
    if expert_weight.ndim != 3 or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]:
        raise ValueError("w")
    g = replay_gates(router_logits, expert_idx, score_function)
    N = x.shape[0]
    Do = expert_weight.shape[2]
    if N == 0:
        return x.new_zeros((0, Do)) + (x.sum() + expert_weight.sum() + router_logits.sum()) * 0
    ys = []
    for n in range(N):
        acc = None
        for c, e in enumerate(expert_idx[n].tolist()):
            t = g[n, c] * (x[n] @ expert_weight[e])
            acc = t if acc is None else acc + t
        ys.append(acc)
    return torch.stack(ys)
