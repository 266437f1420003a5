"""Scalar-loop oracle for __SLUG__: Python floats, loops over (b, t), padding skipped."""

import torch


def masked_mean(x, mask):
    rows, m = x.detach().to(torch.float64).tolist(), mask.bool().tolist()
    out = []
    for b in range(len(rows)):
        total, n = 0.0, 0
        for t in range(len(rows[b])):
            if m[b][t]:
                total += rows[b][t]
                n += 1
        out.append(total / n if n else 0.0)
    return torch.tensor(out, dtype=torch.float64)


def masked_mean_grad(x, mask):
    """d sum_b masked_mean(x, mask)_b / d x: 1/n_b on valid entries, 0 elsewhere."""
    m = mask.bool().tolist()
    grad = []
    for row in m:
        n = sum(row)
        grad.append([(1.0 / n if v else 0.0) for v in row])
    return torch.tensor(grad, dtype=torch.float64).reshape(x.shape)
