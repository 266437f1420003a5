"""T1: sequence ratios, losses and logp-gradients against the scalar-loop oracle on fresh random
inputs, from the smallest case to the largest; the first (smallest) mismatch is reported."""

import torch

from judge.testing import Feedback, assert_close, batch, check_tensor, describe_inputs, leaf, sibling, visible

cases = sibling(__file__, "_cases")

SMALL = ((1, 1), (1, 3), (2, 3))
ALL = SMALL + ((3, 2), (3, 3), (2, 5), (4, 4), (5, 3), (4, 7), (8, 8))
CLIP_EPS = (None, 0.1, 0.3, 0.2)  # None: rely on the default (0.2)


def _check_cases(sub, oracle, ctx, sizes, salt):
    g = ctx.generator(salt)
    k = 0
    queued = []
    with batch(sub) as b:
        for B, L in sizes:
            for dtype in (torch.float64, torch.float32):
                fill = cases.FILLS[k % len(cases.FILLS)]
                old_fill = cases.FILLS[(k + 2) % len(cases.FILLS)]
                empty_row = (k % B) if (B >= 2 and k % 2 == 1) else None
                logp, old, adv, mask = cases.random_batch(g, B, L, dtype, fill=fill, old_fill=old_fill,
                                                          empty_row=empty_row, float_mask=(k % 3 == 2))
                eps = CLIP_EPS[k % len(CLIP_EPS)]
                kw = {} if eps is None else {"clip_eps": eps}
                eps_val = 0.2 if eps is None else eps
                k += 1
                x = leaf(logp)
                queued.append((B, dtype, logp, old, adv, mask, eps_val, x, b.sequence_ratio(logp, old, mask),
                               b.gspo_loss(x, old, adv, mask, **kw)))
    for B, dtype, logp, old, adv, mask, eps_val, x, s, loss in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "clip_eps": eps_val}
        # the oracle's answers, computed while the submission runs the batch
        expected_s = oracle.sequence_ratio(logp, old, mask)
        expected_loss = oracle.gspo_loss(logp, old, adv, mask, eps_val)
        expected_grad = oracle.gspo_loss_grad(logp, old, adv, mask, eps_val)

        s = s.value
        check_tensor(s, what="sequence_ratio", shape=(B,), dtype=dtype)
        assert_close(s, expected_s, what="sequence_ratio s_i",
                     inputs={k_: v for k_, v in inputs.items() if k_ not in ("advantages", "clip_eps")})

        loss = loss.value
        check_tensor(loss, what="gspo_loss", shape=(), dtype=dtype)
        assert_close(loss, expected_loss, what="gspo_loss", inputs=inputs)
        loss.backward()
        if x.grad is None:
            raise Feedback("gspo_loss: no gradient reached logp after loss.backward(); the loss must depend "
                           "on logp through s_i" + describe_inputs(inputs))
        assert_close(x.grad, expected_grad, what="d gspo_loss / d logp", inputs=inputs)


@visible
def test_small_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, SMALL, salt=101)


def test_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, ALL, salt=102)
