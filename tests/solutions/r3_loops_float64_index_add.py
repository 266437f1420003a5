# CORRECT (probe round 4, written from spec.md alone): explicit Python loops over rows and columns, float64 inside, cast back; forward loops over experts with index_add.
import math
import torch


def _validate(u, idx, sf):
    if sf != "softmax" and sf != "sigmoid":
        raise ValueError(sf)
    if len(u.shape) != 2 or len(idx.shape) != 2:
        raise ValueError("dims")
    if idx.dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        raise ValueError("dtype")
    N, E = u.shape
    n2, k = idx.shape
    if n2 != N or k == 0 or k > E:
        raise ValueError("shape")
    for row in idx.tolist():
        for e in row:
            if e < 0 or e >= E:
                raise ValueError("range")
        if len(set(row)) != len(row):
            raise ValueError("repeat")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _validate(router_logits, expert_idx, score_function)
    N, k = expert_idx.shape
    u = router_logits.double()
    rows = []
    for n in range(N):
        cols = [u[n, int(e)] for e in expert_idx[n].tolist()]
        if score_function == "softmax":
            m = max(float(c) for c in cols)
            ex = [torch.exp(c - m) for c in cols]
        else:
            ex = [torch.sigmoid(c) for c in cols]
        tot = ex[0]
        for t in ex[1:]:
            tot = tot + t
        rows.append(torch.stack([t / tot for t in ex]))
    if N == 0:
        return router_logits.new_zeros(0, k) + router_logits.sum() * 0
    return torch.stack(rows).to(router_logits.dtype)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    g = replay_gates(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    if x.dim() != 2 or x.shape[0] != N:
        raise ValueError("x")
    if expert_weight.dim() != 3 or tuple(expert_weight.shape[:2]) != (E, x.shape[1]):
        raise ValueError("W")
    y = x.new_zeros(N, expert_weight.shape[2])
    for e in range(E):
        hit = (expert_idx == e)
        tok, col = hit.nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        contrib = g[tok, col].unsqueeze(1) * (x[tok] @ expert_weight[e])
        y = y.index_add(0, tok, contrib)
    return y
