# A correct solution in another style (a held-out-style probe, written from spec.md alone).
import torch

SF = ("softmax", "sigmoid")


def check(router_logits, expert_idx, score_function):
    if score_function not in SF:
        raise ValueError("score_function")
    if not isinstance(router_logits, torch.Tensor) or router_logits.dim() != 2:
        raise ValueError("router_logits")
    if not isinstance(expert_idx, torch.Tensor) or expert_idx.dim() != 2:
        raise ValueError("expert_idx")
    if expert_idx.dtype == torch.bool or expert_idx.is_floating_point() or expert_idx.is_complex():
        raise ValueError("dtype")
    n, e = router_logits.shape
    if expert_idx.shape[0] != n:
        raise ValueError("N")
    k = expert_idx.shape[1]
    if not 1 <= k <= e:
        raise ValueError("k")
    if expert_idx.numel() and (int(expert_idx.min()) < 0 or int(expert_idx.max()) >= e):
        raise ValueError("range")
    srt = expert_idx.sort(dim=-1).values
    if bool((srt[:, 1:] == srt[:, :-1]).any()):
        raise ValueError("dup")


def check_fwd(x, router_logits, expert_weight):
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x")
    if (not isinstance(expert_weight, torch.Tensor) or expert_weight.dim() != 3
            or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]):
        raise ValueError("W")


def gates(router_logits, expert_idx, score_function):
    u = router_logits.gather(1, expert_idx.long())
    if score_function == "softmax":
        return torch.softmax(u, -1)
    s = torch.sigmoid(u)
    return s / s.sum(-1, keepdim=True)


# CORRECT: per-token Python loop, gates scattered into a dense [N, E] matrix (in the input dtype),
# float64 inside for float32 inputs, cast back.
def replay_gates(router_logits, expert_idx, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    u = router_logits.double().gather(1, expert_idx.long())
    if score_function == "softmax":
        g = torch.softmax(u, -1)
    else:
        s = 1.0 / (1.0 + torch.exp(-u))
        g = s / s.sum(-1, keepdim=True)
    return g.to(router_logits.dtype)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    check_fwd(x, router_logits, expert_weight)
    g = replay_gates(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    dense = torch.zeros(N, E, dtype=g.dtype).scatter(1, expert_idx.long(), g)
    rows = []
    for n in range(N):
        acc = x.new_zeros(expert_weight.shape[-1])
        for e in expert_idx[n].tolist():
            acc = acc + dense[n, e] * (x[n] @ expert_weight[e])
        rows.append(acc)
    if not rows:
        return (x @ expert_weight.sum(0))[:0] if expert_weight.shape[0] else x.new_zeros(0, expert_weight.shape[-1])
    return torch.stack(rows)
