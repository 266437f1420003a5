# CORRECT: full-E masked_fill(-inf) softmax (only selected experts finite), one-hot einsum forward, float64 sigmoid via masked sum
import torch


def _chk(u, idx, sf, E=None):
    if sf not in {"softmax", "sigmoid"}:
        raise ValueError(sf)
    if idx.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        raise ValueError("dtype")
    if u.dim() != 2 or idx.dim() != 2 or idx.size(0) != u.size(0):
        raise ValueError("shape")
    N, E = u.shape
    k = idx.size(1)
    if k < 1 or k > E:
        raise ValueError("k")
    i = idx.to(torch.int64)
    if ((i < 0) | (i >= E)).any():
        raise ValueError("range")
    onehot = torch.zeros(N, E, dtype=torch.int64).scatter_add_(1, i, torch.ones_like(i))
    if (onehot > 1).any():
        raise ValueError("dup")
    return i


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    i = _chk(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    sel = torch.zeros(N, E, dtype=torch.bool).scatter_(1, i, True)
    if score_function == "softmax":
        full = torch.softmax(router_logits.masked_fill(~sel, float("-inf")), dim=-1)
    else:
        s = torch.sigmoid(router_logits).masked_fill(~sel, 0.0)
        full = s / s.sum(-1, keepdim=True)
    return torch.gather(full, 1, i)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    i = _chk(router_logits, expert_idx, score_function)
    if x.dim() != 2 or x.size(0) != router_logits.size(0):
        raise ValueError("x")
    if expert_weight.dim() != 3 or expert_weight.size(0) != router_logits.size(1) or expert_weight.size(1) != x.size(1):
        raise ValueError("w")
    g = replay_gates(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    dense = torch.zeros(N, E, dtype=g.dtype).scatter(1, i, g)  # differentiable in g
    all_out = torch.einsum("nd,edo->neo", x, expert_weight)
    return torch.einsum("ne,neo->no", dense, all_out)
