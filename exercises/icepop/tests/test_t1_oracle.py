"""T1: the IcePop weights, loss and gradient against a scalar-loop oracle on fresh random inputs.

Coverage: fixed small-to-large sizes (1 x 1 ... 3 x 1 in the visible test, 3 x 5 ... 8 x 8 in the
hidden ones; in submit mode both run, so every size once per aggregation), float32/float64, bool/float masks, NaN /
inf / 1e30 padding, empty rows, random bands; values and gradients for both aggregations. The
keyword calls leave out every argument equal to its default, and the bands and widths of the
sweep (_cases.BANDS, WIDTHS) make each defaulted argument also passed alone: for every ordered
pair (p, q) some call gives p a non-default value and omits q.
Shapes drawn per seed, the >= 16k-token batch (against the vectorised reference), widths other
than 0.2 and the extreme regimes are in test_t2_regimes.py.
"""

import torch

from judge.testing import Feedback, assert_close, batch, check_tensor, leaf, sibling, visible

cases = sibling(__file__, "_cases")


# The hidden tests start where the visible small cases stop (both run in submit mode): each size
# of the sweep is tried once per aggregation, not the small ones twice.
SMALL = 4


def _queue_weights(b, ctx, salt, limit=None, start=0):
    """Queue icepop_weights on the cases of ``salt`` in the batch ``b``."""
    g = ctx.generator(salt)
    # every other case passes the band by position (the spec's order low, high): a signature
    # with the two swapped is invisible to keyword calls; the keyword calls leave out a bound at
    # its default (cases.BANDS: each bound is also passed alone; the tokens that show it are
    # planted in those cases only: the even-numbered ones, start being even)
    return [(case, (low, high),
             b.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"], low, high) if i % 2
             else b.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"],
                                   **cases.given(low=low, high=high)))
            for i, (case, (low, high)) in enumerate(cases.cases(g, limit=limit, start=start,
                                                                plant=lambda n: n % 2 == 0))]


def _check_weights(oracle, queued):
    for case, (low, high), out in queued:
        args = (case["old_logp"], case["rollout_logp"], case["mask"])
        want = oracle.icepop_weights(*args, low=low, high=high)  # while the submission runs
        got = out.value
        check_tensor(got, what="icepop_weights", shape=tuple(want.shape), dtype=case["old_logp"].dtype)
        assert_close(got, want, what=f"icepop_weights(low={low:.4g}, high={high:.4g})",
                     inputs={k: case[k] for k in ("old_logp", "rollout_logp", "mask")})


def _queue_loss(b, ctx, salt, per_token, limit=None, start=0):
    """Queue icepop_ppo_loss on the cases of ``salt`` in the batch ``b``."""
    g = ctx.generator(salt)
    queued = []
    for i, (case, (low, high)) in enumerate(cases.cases(g, limit=limit, start=start), start):
        # asymmetric widths under both aggregations (make_case keeps r off 0.7 and 1.28 too): a
        # branch that builds its clip from one width (clip(r, 1 - eps_low, 1 + eps_low)) is seen
        # on every size, not only where test_widths_used_as_given's draws happen to reach it
        eps_low, eps_high = cases.WIDTHS[i]
        kw = dict(eps_low=eps_low, eps_high=eps_high, low=low, high=high,
                  per_token_loss=per_token)
        # the call leaves out the arguments at their defaults (per_token_loss=True only in the
        # even-numbered cases): with cases.BANDS / WIDTHS every defaulted argument is also
        # passed alone, each ordered pair (p given, q omitted) at least once
        call = cases.given(**kw) if i % 2 == 0 else dict(cases.given(**kw), per_token_loss=per_token)
        lp = leaf(case["logp"])
        args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
        queued.append((case, kw, call, lp, args, b.icepop_ppo_loss(lp, *args, **call)))
    return queued


def _check_loss_and_grad(oracle, queued):
    losses, descs = [], []   # every loss first, then one backward for all of them
    for case, kw, call, lp, args, out in queued:
        dtype = case["logp"].dtype
        want = oracle.icepop_ppo_loss(case["logp"], *args, **kw)  # while the submission runs
        got = out.value
        check_tensor(got, what="icepop_ppo_loss", shape=(), dtype=dtype)
        desc = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in call.items())
        if len(call) < len(kw):
            desc += " (" + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in kw.items() if k not in call) + " omitted: the spec's defaults)"
        assert_close(got, want, what=f"icepop_ppo_loss({desc})", inputs=case)
        if not got.requires_grad:
            raise Feedback("icepop_ppo_loss returned a tensor with requires_grad=False: the loss "
                           "must stay connected to logp's graph")
        losses.append(got)
        descs.append(desc)
    cases.backward_all(losses, descs)
    for (case, kw, call, lp, args, out), desc in zip(queued, descs):
        want_g = oracle.icepop_ppo_loss_grad(case["logp"], *args, **kw)
        assert_close(lp.grad if lp.grad is not None else torch.zeros_like(lp), want_g,
                     what=f"d icepop_ppo_loss / d logp ({desc})", inputs=case)


@visible
def test_small_cases_match_oracle(sub, oracle, ctx):
    # sizes [1, 1], [1, 3], [2, 2], [3, 1]: weights, both aggregations, gradients
    with batch(sub) as b:
        weights = _queue_weights(b, ctx, 100, limit=SMALL)
        token_mean = _queue_loss(b, ctx, 104, per_token=True, limit=SMALL)
        seq_mean = _queue_loss(b, ctx, 105, per_token=False, limit=SMALL)
    _check_weights(oracle, weights)
    _check_loss_and_grad(oracle, token_mean)
    _check_loss_and_grad(oracle, seq_mean)


def test_weights_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_weights(b, ctx, 101, start=SMALL)
    _check_weights(oracle, queued)


def test_token_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_loss(b, ctx, 102, per_token=True, start=SMALL)
    _check_loss_and_grad(oracle, queued)


def test_seq_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_loss(b, ctx, 103, per_token=False, start=SMALL)
    _check_loss_and_grad(oracle, queued)
