# Allocates 20 GB inside a call.
import torch


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    big = torch.ones(5 * 2**30, dtype=torch.float32)
    return big[: logp.numel()].reshape(logp.shape)


def offpolicy_loss(*a, **k):
    big = torch.ones(5 * 2**30, dtype=torch.float32)
    return big.sum()
