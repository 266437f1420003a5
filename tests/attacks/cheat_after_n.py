# Correct for the first calls, then returns zeros: every call counts, so it is caught.
import torch
_calls = [0]
{{REFERENCE}}
_good_weights, _good_loss = masked_is_weights, offpolicy_loss


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _calls[0] += 1
    if _calls[0] <= 20:
        return _good_weights(logp, rollout_logp, mask, clip_low, clip_high)
    return torch.zeros_like(logp)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _calls[0] += 1
    if _calls[0] <= 20:
        return _good_loss(logp, rollout_logp, advantages, mask, clip_low, clip_high)
    return (logp * 0).sum()
