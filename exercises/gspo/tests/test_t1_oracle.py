"""T1: sequence ratios, losses and logp-gradients against the scalar-loop oracle on fresh random
inputs, from the smallest case to the largest; the first (smallest) mismatch is reported.

Which test covers which class (issue 17):
- test_small_random_cases_match_oracle / test_random_cases_match_oracle: every fill, bool and float
  masks, empty rows, and (every third case with B >= 2) a non-empty response with A = 0, which
  adds 0 but counts in B (a mean over the responses with A != 0 differs).
- test_seeded_shapes_regimes_mask_kinds_and_defaults: shapes drawn per seed (B = 1, L = 1, one
  batch of >= 16k tokens, i.e. long responses, against the vectorised reference), every mask kind
  and fill, clip_eps omitted or drawn (0 and >= 1 used as given), mean log-ratios +-12 (verl's
  clamp at 10) and overflowing with A > 0 (gradient 0, not NaN), e^-110/e^-800 probabilities,
  empty rows, float64 advantages with float32 logp and float32 advantages with float64 logp (s
  and the loss keep logp's dtype and precision), and in every other call non-contiguous inputs
  (column-major logp and mask, a sliced old_logp, a strided advantages: judge.cases.strided), which a
  .view(-1) cannot flatten.
"""

import torch

from judge import cases as jc
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
                zero_adv_row = ((k + 1) % B) if (B >= 2 and k % 3 == 0) else None   # never the empty row
                logp, old, adv, mask = cases.random_batch(g, B, L, dtype, fill=fill, old_fill=old_fill,
                                                          empty_row=empty_row, float_mask=(k % 3 == 2),
                                                          zero_adv_row=zero_adv_row)
                eps = CLIP_EPS[k % len(CLIP_EPS)]
                kw = {} if eps is None else {"clip_eps": eps}
                eps_val = 0.2 if eps is None else eps
                k += 1
                x = leaf(logp)
                # clip_eps by position in every other case with a width: a keyword-only or
                # reordered clip_eps parameter is wrong on a call in the spec's order
                pos = (kw.pop("clip_eps"),) if (kw and k % 2) else ()
                queued.append((B, dtype, logp, old, adv, mask, eps_val, x, b.sequence_ratio(logp, old, mask),
                               b.gspo_loss(x, old, adv, mask, *pos, **kw)))
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


def test_seeded_shapes_regimes_mask_kinds_and_defaults(sub, oracle, ref, ctx):
    """Shapes drawn per seed (B = 1, L = 1, and one batch of >= 16k tokens, i.e. long responses,
    compared with the vectorised reference), every mask kind, fill, width and regime of
    ``_cases.regime_batch``, non-contiguous views of the same values in every other call
    (``judge.cases.strided``); s and the loss are in logp's dtype."""
    g = ctx.generator(103)
    flip = ctx.seed % 2
    queued = []
    with batch(sub) as b:
        for k, (B, L) in enumerate(jc.shapes(g, n_drawn=5, max_side=9)):
            dtype = (torch.float32, torch.float64)[(k + flip) % 2]
            logp, old, adv, mask, kw = cases.regime_batch(g, B, L, dtype, k)
            if k % 2 == 1:
                v = jc.strided(dict(logp=logp, old=old, adv=adv, mask=mask), major=("logp", "mask"))
                logp, old, adv, mask = v["logp"], v["old"], v["adv"], v["mask"]
            x = leaf(logp)
            queued.append((logp, old, adv, mask, kw, x, b.sequence_ratio(logp, old, mask),
                           b.gspo_loss(x, old, adv, mask, **kw)))
    for logp, old, adv, mask, kw, x, s, loss in queued:
        B, L = logp.shape
        dtype = logp.dtype
        eps = kw.get("clip_eps", 0.2)
        if B * L >= jc.LARGE_TOKENS:
            exp_s = ref.sequence_ratio(logp, old, mask)
            rl = leaf(logp)
            exp_loss = ref.gspo_loss(rl, old, adv, mask, **kw)
            exp_loss.backward()
            exp_grad = rl.grad
        else:
            exp_s = oracle.sequence_ratio(logp, old, mask).to(dtype)  # overflows to inf as the dtype does
            exp_loss = oracle.gspo_loss(logp, old, adv, mask, eps)
            exp_grad = oracle.gspo_loss_grad(logp, old, adv, mask, eps)
        desc = (f"[{B}, {L}] {dtype}, {mask.dtype} mask, advantages {adv.dtype}, "
                + ("" if x.is_contiguous() else "non-contiguous inputs, ")
                + (f"clip_eps={eps}" if kw else "default clip_eps (0.2)"))
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, **kw}
        s = check_tensor(s.value, what=f"sequence_ratio on {desc}", shape=(B,), dtype=dtype)
        # log s is a mean of up to L rounded terms: its absolute error becomes s's relative error
        rtol, atol = jc.scaled_tolerance(dtype, 16.0)
        assert_close(s, exp_s, what=f"sequence_ratio on {desc} (exp of the mean valid log-ratio; no clamp "
                     f"of log s, no product of token ratios, which overflows on long responses)",
                     inputs=inputs, rtol=rtol, atol=atol)
        loss = check_tensor(loss.value, what=f"gspo_loss on {desc} (the loss is in logp's dtype)", shape=(),
                            dtype=dtype)
        big = float((exp_s.to(torch.float64).nan_to_num(posinf=0.0) * adv.abs().to(torch.float64)).max()) if B else 0.0
        assert_close(loss, exp_loss, what=f"gspo_loss on {desc}", inputs=inputs, rtol=rtol,
                     atol=max(atol, rtol * big / max(1, B)))
        loss.backward()
        if x.grad is None:
            raise Feedback(f"gspo_loss on {desc}: no gradient reached logp" + describe_inputs(inputs))
        assert_close(x.grad, exp_grad, what=f"d gspo_loss / d logp on {desc} (finite, 0 for a clipped "
                     f"response even when s overflows)", inputs=inputs, rtol=rtol)
