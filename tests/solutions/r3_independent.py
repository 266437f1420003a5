"""An independent r3 solution: one-hot selection matrices instead of gather, a hand-written
log-sum-exp, and set-based validation. Written apart from reference/r3/solution.py."""

import torch
import torch.nn.functional as F


def _validate(router_logits, expert_idx, score_function):
    if score_function != "softmax" and score_function != "sigmoid":
        raise ValueError(f"score_function must be 'softmax' or 'sigmoid', not {score_function!r}")
    if not torch.is_tensor(router_logits) or router_logits.ndim != 2:
        raise ValueError("router_logits must have shape [N, E]")
    if not torch.is_tensor(expert_idx) or expert_idx.ndim != 2:
        raise ValueError("expert_idx must have shape [N, k]")
    if expert_idx.dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        raise ValueError(f"expert_idx must hold integers, got {expert_idx.dtype}")
    num_tokens, num_experts = router_logits.shape
    rows, k = expert_idx.shape
    if rows != num_tokens:
        raise ValueError(f"{rows} rows of expert ids for {num_tokens} tokens")
    if k < 1 or k > num_experts:
        raise ValueError(f"need 1 <= k <= {num_experts}, got k={k}")
    ids = expert_idx.to(torch.int64)
    if bool(((ids < 0) | (ids >= num_experts)).any()):
        raise ValueError(f"expert ids must be in [0, {num_experts})")
    for row in ids.tolist():
        if len(set(row)) != len(row):
            raise ValueError(f"repeated expert in row {row}")
    return ids


def _selection(ids, num_experts, dtype):
    return F.one_hot(ids, num_experts).to(dtype)  # [N, k, E], one 1 per (token, slot)


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    ids = _validate(router_logits, expert_idx, score_function)
    onehot = _selection(ids, router_logits.shape[1], router_logits.dtype)
    chosen = torch.bmm(onehot, router_logits.unsqueeze(-1)).squeeze(-1)  # [N, k]
    if score_function == "sigmoid":
        p = torch.sigmoid(chosen)
        return p / p.sum(dim=1, keepdim=True)
    shifted = chosen - chosen.max(dim=1, keepdim=True).values
    return torch.exp(shifted - torch.logsumexp(shifted, dim=1, keepdim=True))


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    ids = _validate(router_logits, expert_idx, score_function)
    if not torch.is_tensor(x) or x.ndim != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x must have shape [N, D]")
    if (not torch.is_tensor(expert_weight) or expert_weight.ndim != 3
            or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]):
        raise ValueError("expert_weight must have shape [E, D, D_out]")
    gates = replay_gates(router_logits, expert_idx, score_function)  # [N, k]
    onehot = _selection(ids, router_logits.shape[1], x.dtype)  # [N, k, E]
    # combine weight per (token, expert): zero for experts the token did not record
    combine = (gates.unsqueeze(-1) * onehot).sum(dim=1)  # [N, E]
    every_expert = torch.einsum("nd,edo->neo", x, expert_weight)  # [N, E, D_out]
    return (combine.unsqueeze(-1) * every_expert).sum(dim=1)
