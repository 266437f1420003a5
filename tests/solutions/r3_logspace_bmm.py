# CORRECT (probe round 4, written from spec.md alone): log-space gates: softmax = exp(u - logsumexp(u)); sigmoid = softmax(logsigmoid(u)) (same ratio); bmm forward.
import torch
import torch.nn.functional as F


def _validate(u, idx, sf):
    if sf not in {"softmax", "sigmoid"}:
        raise ValueError(sf)
    if u.dim() != 2 or idx.dim() != 2 or idx.shape[0] != u.shape[0]:
        raise ValueError("shape")
    if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.dtype.is_complex:
        raise ValueError("dtype")
    N, E = u.shape
    k = idx.shape[1]
    if not 0 < k <= E:
        raise ValueError("k")
    if idx.numel():
        if idx.min().item() < 0 or idx.max().item() >= E:
            raise ValueError("range")
        eq = idx.unsqueeze(1) == idx.unsqueeze(2)
        if eq.sum().item() != N * k:
            raise ValueError("repeat")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _validate(router_logits, expert_idx, score_function)
    sel = router_logits[torch.arange(router_logits.shape[0]).unsqueeze(1), expert_idx]
    if score_function == "sigmoid":
        sel = F.logsigmoid(sel)
    return torch.exp(sel - torch.logsumexp(sel, dim=1, keepdim=True))


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    g = replay_gates(router_logits, expert_idx, score_function)
    N, E = router_logits.shape
    if x.dim() != 2 or x.shape[0] != N or expert_weight.dim() != 3 \
            or expert_weight.shape[0] != E or expert_weight.shape[1] != x.shape[1]:
        raise ValueError("x / expert_weight shape")
    W = expert_weight.index_select(0, expert_idx.reshape(-1).long())       # [N*k, D, Do]
    xs = x.repeat_interleave(expert_idx.shape[1], dim=0).unsqueeze(1)     # [N*k, 1, D]
    out = torch.bmm(xs, W).squeeze(1).reshape(N, expert_idx.shape[1], expert_weight.shape[2])
    return torch.einsum("nk,nko->no", g, out)
