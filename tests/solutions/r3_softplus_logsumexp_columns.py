# CORRECT: take_along_dim gather, log-sigma as -softplus(-u), gates exp(s - logsumexp(s)); forward one column at a time (index_select + bmm), accumulated
import torch


def _check(router_logits, expert_idx, score_function):
    if score_function not in ("softmax", "sigmoid"):
        raise ValueError("score_function")
    if not isinstance(router_logits, torch.Tensor) or router_logits.dim() != 2:
        raise ValueError("router_logits must be 2-D")
    if not isinstance(expert_idx, torch.Tensor) or expert_idx.dim() != 2:
        raise ValueError("expert_idx must be 2-D")
    if expert_idx.dtype.is_floating_point or expert_idx.dtype == torch.bool or expert_idx.dtype.is_complex:
        raise ValueError("expert_idx must be integer")
    N, E = router_logits.shape
    if expert_idx.shape[0] != N:
        raise ValueError("N mismatch")
    k = expert_idx.shape[1]
    if k == 0 or k > E:
        raise ValueError("k")
    if expert_idx.numel():
        if (expert_idx < 0).any() or (expert_idx >= E).any():
            raise ValueError("id range")
        s = expert_idx.sort(dim=1).values
        if (s[:, 1:] == s[:, :-1]).any():
            raise ValueError("repeated expert")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _check(router_logits, expert_idx, score_function)
    sel = torch.take_along_dim(router_logits, expert_idx.long(), dim=1)
    if score_function == "sigmoid":
        sel = -torch.nn.functional.softplus(-sel)   # log sigma
    return torch.exp(sel - torch.logsumexp(sel, dim=1, keepdim=True))


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    _check(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != N:
        raise ValueError("x")
    if not isinstance(expert_weight, torch.Tensor) or expert_weight.dim() != 3 \
            or expert_weight.shape[0] != E or expert_weight.shape[1] != x.shape[1]:
        raise ValueError("expert_weight")
    g = replay_gates(router_logits, expert_idx, score_function)
    idx = expert_idx.long()
    y = x.new_zeros(N, expert_weight.shape[2])
    for c in range(idx.shape[1]):   # one column at a time, experts via index_select
        W = expert_weight.index_select(0, idx[:, c])
        y = y + g[:, c:c + 1] * torch.bmm(x.unsqueeze(1), W).squeeze(1)
    return y
