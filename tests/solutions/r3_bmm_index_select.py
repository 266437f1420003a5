# A correct solution in another style (a held-out-style probe, written from spec.md alone).
import torch

SF = ("softmax", "sigmoid")


def check_fwd(x, router_logits, expert_weight):
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x")
    if (not isinstance(expert_weight, torch.Tensor) or expert_weight.dim() != 3
            or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]):
        raise ValueError("W")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    return gates(router_logits, expert_idx, score_function)


# CORRECT: sorts the route for validation with unique_consecutive, uses index_select + bmm, and
# a max-subtracted softmax written out by hand with a detached max.
def check(router_logits, expert_idx, score_function):
    if score_function not in SF:
        raise ValueError("score_function")
    if not torch.is_tensor(router_logits) or not torch.is_tensor(expert_idx):
        raise ValueError("tensor")
    if router_logits.ndim != 2 or expert_idx.ndim != 2:
        raise ValueError("dims")
    if expert_idx.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        raise ValueError("dtype")
    n, e = router_logits.shape
    if expert_idx.shape[0] != n or not (1 <= expert_idx.shape[1] <= e):
        raise ValueError("shape")
    for row in expert_idx.tolist():
        if any(v < 0 or v >= e for v in row) or len(set(row)) != len(row):
            raise ValueError("ids")


def gates(router_logits, expert_idx, score_function):
    u = torch.stack([router_logits[i].index_select(0, expert_idx[i].long()) for i in range(router_logits.shape[0])]) \
        if router_logits.shape[0] else router_logits.gather(1, expert_idx.long())
    if score_function == "softmax":
        z = torch.exp(u - u.max(-1, keepdim=True).values.detach())
        return z / z.sum(-1, keepdim=True)
    s = torch.sigmoid(u)
    return s / s.sum(-1, keepdim=True)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    check_fwd(x, router_logits, expert_weight)
    g = gates(router_logits, expert_idx, score_function)
    N, k = expert_idx.shape
    W = expert_weight.index_select(0, expert_idx.reshape(-1).long())          # [N*k, D, Do]
    xo = torch.bmm(x.repeat_interleave(k, 0).unsqueeze(1), W).squeeze(1)     # [N*k, Do]
    return (g.reshape(-1, 1) * xo).reshape(N, k, expert_weight.shape[-1]).sum(1)
