# CORRECT: int32 kept as is for indexing, softmax by explicit max-shift, validation by unique_consecutive per row after sort
import torch


def _v(u, idx, sf):
    if sf != "softmax" and sf != "sigmoid":
        raise ValueError("score_function")
    if idx.dtype == torch.bool or torch.is_floating_point(idx) or torch.is_complex(idx):
        raise ValueError("ids")
    if len(u.shape) != 2 or len(idx.shape) != 2:
        raise ValueError("2d")
    if idx.shape[0] != u.shape[0]:
        raise ValueError("N")
    E = u.shape[1]
    if idx.shape[1] == 0 or idx.shape[1] > E:
        raise ValueError("k")
    bad = (idx < 0) | (idx >= E)
    if bool(bad.any()):
        raise ValueError("range")
    srt = torch.sort(idx, dim=1).values
    if bool((torch.diff(srt, dim=1) == 0).any()):
        raise ValueError("dup")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _v(router_logits, expert_idx, score_function)
    rows = torch.arange(router_logits.shape[0]).unsqueeze(1)
    u = router_logits[rows, expert_idx]
    if score_function == "softmax":
        z = u - u.max(dim=1, keepdim=True).values.detach() if u.shape[0] else u
        e = torch.exp(z)
        return e / e.sum(1, keepdim=True)
    s = torch.exp(-torch.nn.functional.softplus(-u))
    return s / s.sum(1, keepdim=True)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    _v(router_logits, expert_idx, score_function)
    if len(x.shape) != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x")
    if len(expert_weight.shape) != 3 or tuple(expert_weight.shape[:2]) != (router_logits.shape[1], x.shape[1]):
        raise ValueError("w")
    g = replay_gates(router_logits, expert_idx, score_function)
    y = x.new_zeros(x.shape[0], expert_weight.shape[2])
    for c in range(expert_idx.shape[1]):
        Wc = expert_weight[expert_idx[:, c]]          # [N, D, Do]
        y = y + g[:, c:c + 1] * torch.bmm(x.unsqueeze(1), Wc).squeeze(1)
    return y
