"""Rollout Routing Replay (R3) for one MoE layer: the vectorised reference.

Paper: Ma et al., "Stabilizing MoE Reinforcement Learning by Aligning Training and Inference
Routers", https://arxiv.org/abs/2510.11370 (the section "Rollout Routing Replay"). The rollout
engine records, for every token, the set of experts I its router picked; the trainer replays I
instead of recomputing TopK(u) from its own logits u, and recomputes only the gate weights:

    softmax:  g_i = exp(u_i) / sum_{j in I} exp(u_j)          for i in I
    sigmoid:  g_i = sigma(u_i) / sum_{j in I} sigma(u_j)
    y = sum_{i in I} g_i * (x @ W_{e_i})

The selection is a constant (integers carry no gradient); the gates are differentiable functions
of the SELECTED logits, so the router still learns, and x and the selected experts' weights get
their ordinary gradients. For softmax, dy/du_j = g_j (E_j(x) - y).

slime (slime/utils/routing_replay.py) does the same inside Megatron's
topk_routing_with_score_function: in the replay stage it swaps torch.topk for
``scores.gather(1, top_indices)`` with the recorded indices and keeps the score function.
"""

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


def replay_gates(router_logits: torch.Tensor, expert_idx: torch.Tensor,
                 score_function: str = "softmax") -> torch.Tensor:
    """Gate weights of the recorded experts, recomputed from the trainer's router logits.

    router_logits: [N, E] float; expert_idx: [N, k] integer (recorded by the rollout engine).
    Returns [N, k], column c pairing with expert expert_idx[:, c]; each row sums to 1.
    """
    _check_routing(router_logits, expert_idx, score_function)
    idx = expert_idx.long()
    u_sel = router_logits.gather(1, idx)  # [N, k]  logits of the replayed experts only
    if score_function == "softmax":
        return torch.softmax(u_sel, dim=-1)  # max-subtracted: finite for any finite logits
    s = torch.sigmoid(u_sel)  # [N, k]
    return s / s.sum(dim=-1, keepdim=True)


def moe_replay_forward(x: torch.Tensor, router_logits: torch.Tensor, expert_idx: torch.Tensor,
                       expert_weight: torch.Tensor, score_function: str = "softmax") -> torch.Tensor:
    """MoE layer output with the replayed route: y_n = sum_c g_{n,c} x_n W_{expert_idx[n, c]}.

    x: [N, D]; router_logits: [N, E]; expert_idx: [N, k]; expert_weight: [E, D, D_out].
    Returns [N, D_out].
    """
    _check_routing(router_logits, expert_idx, score_function)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != router_logits.shape[0]:
        raise ValueError(f"x must be [N, D] with N={router_logits.shape[0]}, got shape "
                         f"{tuple(getattr(x, 'shape', ()))}")
    if (not isinstance(expert_weight, torch.Tensor) or expert_weight.dim() != 3
            or expert_weight.shape[0] != router_logits.shape[1] or expert_weight.shape[1] != x.shape[1]):
        raise ValueError(f"expert_weight must be [E, D, D_out] = [{router_logits.shape[1]}, {x.shape[1]}, *], "
                         f"got shape {tuple(getattr(expert_weight, 'shape', ()))}")
    gates = replay_gates(router_logits, expert_idx, score_function)  # [N, k]
    w_sel = expert_weight[expert_idx.long()]  # [N, k, D, D_out]
    expert_out = torch.einsum("nd,nkdo->nko", x, w_sel)  # [N, k, D_out]  E_i(x) = x W_{e_i}
    return torch.einsum("nk,nko->no", gates, expert_out)  # [N, D_out]
