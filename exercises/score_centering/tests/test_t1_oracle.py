"""T1: sc_correction and sc_policy_loss against the scalar-loop oracle on fresh random inputs.
(k = 1 ... V, every mode with random bounds, NaN/inf/1e30 padding, an empty response; in
test_loss_random also (B, L) drawn per seed, the corners 1 x 1, 1 x L, B x 1, and every mask
encoding. The >= 16k-token batch against the reference: test_t2_regimes.py.)

Every other call passes its inputs as non-contiguous views of the same values (_cases.strided:
transposed layouts, slices of wider tensors): an implementation that flattens with .view raises.
The other calls pass every argument by position, mode, low, high and eps included (in the spec's
order): a signature with two of them swapped (high before low, eps before the bounds) is invisible
to keyword calls; by position it raises (low > high) or computes other values. The keyword calls
in "tis" / "mis" leave one bound out in turn (high, then low: _cases.omit_one_bound; expected at
the spec's default), so each bound is also passed alone (eps alone: test_t2_properties).

Values and gradients: the gradient of the correction w.r.t. train_head_logp must equal the
detached head coefficients sg(q w - alpha' p); the loss gradients are -m A w_a / N (logp) and
m A coef / N (train_head_logp). Padding holds NaN / inf / 1e30.
"""

import torch

from judge import cases as shared
from judge.testing import assert_close, backward_all, backward_losses, batch, leaf, sibling, visible

cases = sibling(__file__, "_cases")
LOSS_ARGS = ("logp", "rollout_logp", "train_head_logp", "sampler_head_logp", "advantages", "mask")


def _f32_tol(dtype):
    """float32 correction values are sums of terms of size |q log p|, |alpha' p log p| that cancel,
    and rho amplifies the rounding of P_H: allow 1e-5 absolute (the observed worst is ~2e-6)."""
    return dict(rtol=2e-5, atol=1e-5) if dtype == torch.float32 else {}


def _check_correction(sub, oracle, ctx, salt, sizes):
    g = ctx.generator(salt)
    runs = []
    with batch(sub) as b:  # every case's inputs first, drawn in the same order as one case at a time
        for i, (lead, V, k, dtype) in enumerate(sizes):
            th, sh, *_ = cases.heads(g, lead, V, k, smooth=cases.smooth_for(dtype, V, k))
            th, sh = th.to(dtype), sh.to(dtype)
            if i % 2 == 1:  # every other case as non-contiguous views of the same values
                th, sh = (cases.strided(dict(train_head_logp=th, sampler_head_logp=sh))[key]
                          for key in ("train_head_logp", "sampler_head_logp"))
            mode, low, high = cases.mode_and_bounds(g, i)
            kw = dict(mode=mode, low=low, high=high)
            x = leaf(th)
            call_kw = kw
            if i % 2 == 0:  # by position: (train, sampler, mode, low, high, eps)
                pending = b.sc_correction(x, sh, mode, low, high, 1e-6)
            else:  # by keyword, one bound left out in tis / mis (expected at its default)
                kw, call_kw = cases.omit_one_bound(kw, i)
                pending = b.sc_correction(x, sh, **call_kw)
            r = torch.randn(lead, generator=g, dtype=torch.float64).to(dtype)
            runs.append((dtype, th, sh, kw, cases.omitted_note(kw, call_kw), x, r, pending))
    checked = []  # every value first, then one backward pass for all (one round trip, not one per case)
    for dtype, th, sh, kw, note, x, r, pending in runs:
        mode, low, high = kw["mode"], kw["low"], kw["high"]
        out = pending.value
        inputs = dict(train_head_logp=th, sampler_head_logp=sh, mode=mode, low=low, high=high)
        want, coef = oracle.sc_correction_and_coefficients(th, sh, **kw)
        assert_close(out, want, what=f"sc_correction (mode={mode!r}{note})", inputs=inputs,
                     **_f32_tol(dtype))
        checked.append((out, dtype, x, r, inputs, f"mode={mode!r}{note}", coef))
    # d(sum r * c) = c.backward(r); an output off the graph leaves x.grad None, which fails below
    backward_all([(out, r.to(out.dtype)) for out, _, _, r, *_ in checked if out.requires_grad])
    for out, dtype, x, r, inputs, how, coef in checked:
        expected = coef * r.to(torch.float64).unsqueeze(-1)
        assert_close(x.grad, expected,
                     what=f"d(sum r*c)/d train_head_logp (= r * sg(q w - alpha' p); {how})",
                     inputs={**inputs, "r (upstream gradient)": r}, **_f32_tol(dtype))


def _check_loss(sub, oracle, ctx, salt, sizes=None):
    """Loss cases of ``sizes`` (B, L, V, k, dtype), or (None) the fixed ones of test_loss_random
    and six drawn per seed with every mask encoding (``cases.drawn_loss_sizes``)."""
    g = ctx.generator(salt)
    sizes = [(*size, None) for size in sizes] if sizes is not None else cases.drawn_loss_sizes(g, RANDOM_FIXED)
    runs = []
    with batch(sub) as b:
        for i, (B, L, V, k, dtype, kind) in enumerate(sizes):
            t, kw = cases.loss_case(g, B, L, V, k, dtype, i)
            if kind is not None:
                t["mask"] = shared.as_mask(t["mask"] != 0, kind)
            if i % 2 == 1:  # every other call: non-contiguous views of the same values
                t = cases.strided(t)
            logp, head = leaf(t["logp"]), leaf(t["train_head_logp"])
            args = {**t, "logp": logp, "train_head_logp": head}
            call_kw = kw
            if i % 2 == 0:  # by position, in the spec's order, mode, low, high and eps included
                pending = b.sc_policy_loss(*(args[key] for key in LOSS_ARGS),
                                           kw["mode"], kw["low"], kw["high"], 1e-6)
            else:  # by keyword, one bound left out in tis / mis (expected at its default)
                kw, call_kw = cases.omit_one_bound(kw, i)
                pending = b.sc_policy_loss(**args, **call_kw)
            runs.append((kind, t, kw, cases.omitted_note(kw, call_kw), logp, head, pending))
    checked = []  # every value first, then one backward pass for all the losses (each on its own leaves)
    for kind, t, kw, note, logp, head, pending in runs:
        loss = pending.value
        inputs = {**t, **kw}
        # drawn sizes: float32 heads of any V and k (see _f32_tol)
        tol = _f32_tol(t["logp"].dtype) if kind is not None else {}
        where = (f"[{', '.join(map(str, t['train_head_logp'].shape))}] {t['logp'].dtype}, {t['mask'].dtype} mask"
                 f"{note}")
        want, g_logp, g_head = oracle.sc_policy_loss_and_grads(**t, **kw)
        assert_close(loss, want, what=f"sc_policy_loss (mode={kw['mode']!r}; {where})",
                     inputs=inputs, **tol)
        checked.append((loss, f"sc_policy_loss (mode={kw['mode']!r}; {where})", kw, logp, head, inputs, tol, where,
                        g_logp, g_head))
    backward_losses([c[0] for c in checked], [c[1] for c in checked])
    for loss, _, kw, logp, head, inputs, tol, where, g_logp, g_head in checked:
        assert_close(logp.grad, g_logp, what=f"d loss / d logp (= -m A w_a / N; mode={kw['mode']!r}; {where})",
                     inputs=inputs, **tol)
        assert_close(head.grad, g_head,
                     what=f"d loss / d train_head_logp (= m A sg(q w - alpha' p) / N; mode={kw['mode']!r}; "
                          f"{where})",
                     inputs=inputs, **tol)


# test_loss_random's fixed sizes: a one-token head (k = 1), a whole-vocabulary head (k = V), a
# square float32 batch and the largest vocabulary, (2, 3, 5, 1), (3, 2, 5, 5), (4, 4, 10, 5) and
# (8, 6, 16, 8); the drawn sizes follow
RANDOM_FIXED = [cases.LOSS_SIZES[i] for i in (1, 3, 5, 7)]


@visible
def test_correction_small_cases(sub, oracle, ctx):
    _check_correction(sub, oracle, ctx, 101, cases.CORRECTION_SIZES[:3])


def test_correction_random(sub, oracle, ctx):
    _check_correction(sub, oracle, ctx, 102, cases.CORRECTION_SIZES)


@visible
def test_loss_small_cases(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx, 103, cases.LOSS_SIZES[:3])


def test_loss_random(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx, 104)
