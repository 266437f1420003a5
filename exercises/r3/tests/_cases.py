"""Shared case generators and trusted float64 formulas for the r3 tier tests."""

from __future__ import annotations

import itertools
import math

import torch

DTYPES = (torch.float32, torch.float64)
SCORE_FUNCTIONS = ("softmax", "sigmoid")
# finite logits far beyond the 1000 the spec names, per dtype (u - max stays finite): a finite
# masked_fill value (-1e4, -1e9, -1e30) for the unselected logits loses to these
HUGE_LOGIT = {torch.float32: 1e32, torch.float64: 1e300}
# a gap between two selected logits whose exp overflows in the dtype (88.7 / 709.8)
GRAD_SPREAD = {torch.float32: 120.0, torch.float64: 800.0}

# (N, E, k, D, D_out), smallest first; covers k = 1, k = E, N != E and D != D_out.
T1_SIZES = [
    (1, 2, 1, 1, 1),
    (2, 3, 2, 2, 3),
    (3, 4, 4, 2, 2),
    (4, 3, 1, 3, 2),
    (5, 6, 2, 3, 4),
    (7, 8, 3, 4, 2),
    (16, 8, 2, 8, 8),
    (24, 16, 5, 5, 6),
]


def distinct_idx(g: torch.Generator, n: int, e: int, k: int) -> torch.Tensor:
    """[n, k] int64: k distinct experts per row, in random column order."""
    return torch.rand(n, e, generator=g).argsort(dim=-1)[:, :k].contiguous()


_ROUTES: dict[tuple[int, int], torch.Tensor] = {}


def drawn_rows_idx(g: torch.Generator, n: int, e: int, k: int) -> torch.Tensor:
    """[n, k] int64 with the distribution of ``distinct_idx`` (each row a uniformly random ordered
    choice of k distinct experts), drawn as rows of the table of every such choice: one
    randint for a large batch instead of sorting [n, e] random numbers. For small E only."""
    table = _ROUTES.get((e, k))
    if table is None:
        table = _ROUTES[(e, k)] = torch.tensor(list(itertools.permutations(range(e), k)), dtype=torch.int64)
    return table[torch.randint(0, table.shape[0], (n,), generator=g)]


def make_case(g: torch.Generator, n: int, e: int, k: int, d: int, d_out: int,
              dtype: torch.dtype = torch.float64, scale: float = 2.0, ids=distinct_idx):
    """x [n, d], router logits u [n, e], recorded experts idx [n, k] (drawn by ``ids``), expert
    weights W [e, d, d_out]."""
    x = torch.randn(n, d, generator=g, dtype=torch.float64).to(dtype)
    u = (scale * torch.randn(n, e, generator=g, dtype=torch.float64)).to(dtype)
    idx = ids(g, n, e, k)
    w = (torch.randn(e, d, d_out, generator=g, dtype=torch.float64) / math.sqrt(d)).to(dtype)
    return x, u, idx, w


def strided(x, u, idx, w):
    """The same values as non-contiguous views (any [N, D] / [N, E] / [N, k] / [E, D, D_out]
    tensor is a valid input; an implementation that flattens with ``.view`` raises on these): x and
    router_logits column-major (``t.t().contiguous().t()``), expert_idx a column slice of a tensor
    twice as wide, expert_weight with its last two axes swapped in memory."""
    return (x.t().contiguous().t(), u.t().contiguous().t(), torch.cat([idx, idx], dim=1)[:, :idx.shape[1]],
            w.transpose(1, 2).contiguous().transpose(1, 2))


def gates64(u: torch.Tensor, idx: torch.Tensor, score_function: str) -> torch.Tensor:
    """Trusted replayed gates in float64, [N, k]."""
    sel = u.detach().double().gather(1, idx.long())
    if score_function == "softmax":
        return torch.softmax(sel, dim=-1)
    s = torch.sigmoid(sel)
    return s / s.sum(dim=-1, keepdim=True)


def expert_outputs64(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """E_i(x) = x W_{e_i} for the replayed experts, float64 [N, k, D_out]: x W_e for every expert
    e, then the replayed columns gathered (at the tests' small E, a fifth of the time of building
    the [N, k, D, D_out] stack of selected weights at N = 16k)."""
    xw = torch.einsum("nd,edo->neo", x.detach().double(), w.detach().double())  # [N, E, D_out]
    return xw.gather(1, idx.long().unsqueeze(-1).expand(-1, -1, xw.shape[-1]))


def forward64(x, u, idx, w, score_function):
    g = gates64(u, idx, score_function)
    return torch.einsum("nk,nko->no", g, expert_outputs64(x, idx, w))


def standard_moe64(x, u, w, k, score_function):
    """An ordinary MoE forward that recomputes I = TopK(u) (Megatron's non-pre-softmax rule,
    sigmoid normalised over the top-k as in this exercise)."""
    idx = torch.topk(u.detach().double(), k, dim=-1).indices
    return forward64(x, u, idx, w, score_function)


def dy_du64(x, u, idx, w, score_function):
    """Closed form dy/du_{idx[n, c]} as [N, k, D_out]: g_c (E_c - y), times (1 - sigma(u_c)) for sigmoid."""
    g = gates64(u, idx, score_function)
    ex = expert_outputs64(x, idx, w)
    y = torch.einsum("nk,nko->no", g, ex)
    coef = g
    if score_function == "sigmoid":
        coef = g * (1 - torch.sigmoid(u.detach().double().gather(1, idx.long())))
    return coef.unsqueeze(-1) * (ex - y.unsqueeze(1))


def on_graph(out, what: str) -> torch.Tensor:
    """``out``, or a Feedback when the submission returned something else or a detached output
    (its backward pass then goes with the others: judge.testing.backward_all)."""
    from judge.testing import Feedback, check_tensor

    check_tensor(out, what=what)
    if not out.requires_grad:
        raise Feedback(f"{what} returned a tensor with requires_grad=False although its inputs require grad: "
                       f"the output was detached (only the expert ids are replayed; gates, x and the expert "
                       f"weights must stay differentiable)")
    return out
