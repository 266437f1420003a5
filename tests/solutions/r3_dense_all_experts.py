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


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    return gates(router_logits, expert_idx, score_function)


# CORRECT: computes every expert's output densely and gathers the selected ones; gates via
# logsigmoid + logsumexp (sigmoid) and log_softmax of the selected logits, exp at the end.
def gates(router_logits, expert_idx, score_function):
    u = router_logits.gather(1, expert_idx.long())
    if score_function == "softmax":
        return (u - torch.logsumexp(u, -1, keepdim=True)).exp()
    ls = torch.nn.functional.logsigmoid(u)
    return (ls - torch.logsumexp(ls, -1, keepdim=True)).exp()


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    check(router_logits, expert_idx, score_function)
    check_fwd(x, router_logits, expert_weight)
    g = gates(router_logits, expert_idx, score_function)
    all_out = torch.einsum("nd,edo->neo", x, expert_weight)
    idx = expert_idx.long().unsqueeze(-1).expand(-1, -1, all_out.shape[-1])
    sel = all_out.gather(1, idx)
    return (g.unsqueeze(-1) * sel).sum(1)
