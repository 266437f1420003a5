"""R3: rollout routing replay for one MoE layer. Fill in both functions (see spec.md)."""

import torch


def replay_gates(router_logits: torch.Tensor, expert_idx: torch.Tensor,
                 score_function: str = "softmax") -> torch.Tensor:
    """Gate weights of the recorded experts, recomputed from the trainer's router logits.

    Args:
        router_logits: [N, E] float32 or float64, the trainer's router logits u.
        expert_idx: [N, k] integer tensor (int64 or int32), the k distinct experts the
            rollout engine selected for each token. Replay them; never call topk.
        score_function: "softmax" or "sigmoid".

    Returns:
        [N, k] tensor in router_logits' dtype; column c is the gate of expert expert_idx[:, c].
        softmax: g_i = exp(u_i) / sum_{j in I} exp(u_j); sigmoid: sigma(u_i) / sum_{j in I} sigma(u_j).
        Differentiable with respect to the selected logits.

    Raises:
        ValueError: non-integer (float or bool) expert_idx, an id outside [0, E), a repeated
            expert within a row, mismatched or non-2-D shapes, k outside [1, E], or an unknown
            score_function.
    """
    raise NotImplementedError("replay_gates is not implemented yet")


def moe_replay_forward(x: torch.Tensor, router_logits: torch.Tensor, expert_idx: torch.Tensor,
                       expert_weight: torch.Tensor, score_function: str = "softmax") -> torch.Tensor:
    """MoE layer output with the replayed route: y_n = sum_c g_{n,c} * (x_n @ W[expert_idx[n, c]]).

    Args:
        x: [N, D] token inputs.
        router_logits: [N, E] the trainer's router logits.
        expert_idx: [N, k] recorded expert ids (as in replay_gates).
        expert_weight: [E, D, D_out] one linear expert per slice: E_e(x) = x @ expert_weight[e].
        score_function: "softmax" or "sigmoid".

    Returns:
        [N, D_out] tensor in the inputs' dtype; gradients reach x, the selected logits and the
        selected experts' weights.

    Raises:
        ValueError: everything replay_gates rejects, plus x not [N, D] or expert_weight not [E, D, D_out].
    """
    raise NotImplementedError("moe_replay_forward is not implemented yet")
