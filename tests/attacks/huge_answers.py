# Every call answers with {{MB}} MB of tensor data (the wrong shape: no test can use it), so a
# batch of calls would make the judge decode and hold one such answer per call.
import torch

N = {{MB}} * (1 << 20) // 8


def masked_is_weights(*a, **k):
    return torch.zeros(N, dtype=torch.float64)


def offpolicy_loss(*a, **k):
    return torch.zeros(N, dtype=torch.float64)
