# Wrong only where a ratio overflows (weight 1 instead of 0), and hides it: it rewrites
# rollout_logp there in place, so a test that computes its expectation from the tensors it sent,
# after the call, would expect what this returned. Inputs are read-only: every such write fails.
{{REFERENCE}}
import torch
_good_weights, _good_loss = masked_is_weights, offpolicy_loss


def _steer(logp, rollout_logp):
    far = (logp.detach() - rollout_logp).abs() > 50
    if bool(far.any()):
        rollout_logp[far] = logp.detach()[far]  # ratio 1 there: kept, where the spec drops it


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _steer(logp, rollout_logp)
    return _good_weights(logp, rollout_logp, mask, clip_low, clip_high)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _steer(logp, rollout_logp)
    return _good_loss(logp, rollout_logp, advantages, mask, clip_low, clip_high)
