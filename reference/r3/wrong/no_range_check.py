"""Does not check that ids lie in [0, E): -1 silently wraps to the last expert, E raises IndexError.

expect: T0

Indexing with router_logits[rows, idx] accepts negative ids.
"""

import torch


def _check(router_logits, expert_idx, score_function):
    if score_function not in ("softmax", "sigmoid"):
        raise ValueError(f"unknown score_function {score_function!r}")
    if router_logits.dim() != 2 or expert_idx.dim() != 2:
        raise ValueError("router_logits and expert_idx must be 2-D")
    if expert_idx.dtype == torch.bool or expert_idx.is_floating_point():
        raise ValueError(f"expert_idx must be an integer tensor, got {expert_idx.dtype}")
    n, e = router_logits.shape
    if expert_idx.shape[0] != n or not 1 <= expert_idx.shape[1] <= e:
        raise ValueError(f"bad expert_idx shape {tuple(expert_idx.shape)} for logits {tuple(router_logits.shape)}")
    s = expert_idx.sort(dim=-1).values
    if bool((s[:, 1:] == s[:, :-1]).any()):
        raise ValueError("duplicate expert in a row")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _check(router_logits, expert_idx, score_function)
    rows = torch.arange(router_logits.shape[0]).unsqueeze(1)
    u = router_logits[rows, expert_idx.long()]
    if score_function == "softmax":
        return torch.softmax(u, dim=-1)
    s = torch.sigmoid(u)
    return s / s.sum(dim=-1, keepdim=True)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    _check(router_logits, expert_idx, score_function)
    if x.dim() != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x must be [N, D]")
    if expert_weight.dim() != 3 or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]:
        raise ValueError("expert_weight must be [E, D, D_out]")
    g = replay_gates(router_logits, expert_idx, score_function)
    w = expert_weight[expert_idx.long()]
    return torch.einsum("nk,nko->no", g, torch.einsum("nd,nkdo->nko", x, w))

