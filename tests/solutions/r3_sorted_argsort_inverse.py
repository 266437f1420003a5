# CORRECT: columns sorted by id for the gates (softmax with a detached max), unsorted by the inverse permutation; per-token, per-column python loop for the output
from __future__ import annotations

import torch

_SCORE_FUNCTIONS = ("softmax", "sigmoid")


def _check_routing(router_logits: torch.Tensor, expert_idx: torch.Tensor, score_function: str) -> None:
    if score_function not in _SCORE_FUNCTIONS:
        raise ValueError(f"score_function must be one of {_SCORE_FUNCTIONS}, got {score_function!r}")
    if not isinstance(router_logits, torch.Tensor) or router_logits.dim() != 2:
        raise ValueError(f"router_logits must be a 2-D tensor [N, E], got shape "
                         f"{tuple(getattr(router_logits, 'shape', ()))}")
    if not isinstance(expert_idx, torch.Tensor) or expert_idx.dim() != 2:
        raise ValueError(f"expert_idx must be a 2-D tensor [N, k], got shape "
                         f"{tuple(getattr(expert_idx, 'shape', ()))}")
    if expert_idx.dtype == torch.bool or expert_idx.is_floating_point() or expert_idx.is_complex():
        raise ValueError(f"expert_idx must hold integer expert ids, got dtype {expert_idx.dtype}")
    n, e = router_logits.shape
    if expert_idx.shape[0] != n:
        raise ValueError(f"expert_idx has {expert_idx.shape[0]} rows but router_logits has {n} "
                         f"(shapes {tuple(expert_idx.shape)} and {tuple(router_logits.shape)})")
    k = expert_idx.shape[1]
    if not 1 <= k <= e:
        raise ValueError(f"expert_idx must select 1 <= k <= E={e} experts per token, got k={k}")
    if expert_idx.numel() and (int(expert_idx.min()) < 0 or int(expert_idx.max()) >= e):
        raise ValueError(f"expert ids must lie in [0, {e}), got values in "
                         f"[{int(expert_idx.min())}, {int(expert_idx.max())}]")
    srt = expert_idx.sort(dim=-1).values  # duplicates anywhere in a row become adjacent
    if bool((srt[:, 1:] == srt[:, :-1]).any()):
        raise ValueError("expert_idx repeats an expert within a token's row; "
                         "a replayed route selects k distinct experts")


def replay_gates(router_logits, expert_idx, score_function="softmax"):
    _check_routing(router_logits, expert_idx, score_function)
    srt, order = expert_idx.long().sort(dim=1)
    u = router_logits.gather(1, srt)
    if score_function == "softmax":
        m = u.max(dim=1, keepdim=True).values.detach()
        z = torch.exp(u - m)
        gs = z / z.sum(1, keepdim=True)
    else:
        s = torch.sigmoid(u)
        gs = s / s.sum(1, keepdim=True)
    inv = torch.argsort(order, dim=1)
    return gs.gather(1, inv)


def moe_replay_forward(x, router_logits, expert_idx, expert_weight, score_function="softmax"):
    _check_routing(router_logits, expert_idx, score_function)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError("x")
    if (not isinstance(expert_weight, torch.Tensor) or expert_weight.dim() != 3
            or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]):
        raise ValueError("expert_weight")
    g = replay_gates(router_logits, expert_idx, score_function)
    rows = []
    for n in range(x.shape[0]):
        acc = 0
        for c in range(expert_idx.shape[1]):
            acc = acc + g[n, c] * (x[n] @ expert_weight[int(expert_idx[n, c])])
        rows.append(acc)
    if not rows:
        return x.new_zeros(0, expert_weight.shape[2]) + 0 * expert_weight.sum() * 0
    return torch.stack(rows)
