"""T2: the centring identity, hand-checked values, the eps floors, endpoints, detachment, padding.

Which test covers which class (more in test_t2_regimes.py):
- test_seed_check_uncentered_mean / test_hand_checked_case / test_tail_weight_alpha_prime: the
  spec's numbers; alpha' = rho f(1/rho) per mode.
- test_gradient_identity_full_vocabulary_centering / test_whole_vocabulary_head_is_exact: the
  centring identity, P_H = Q_H = 1 up to rounding.
- test_eps_floors_keep_extremes_finite: the floors, exact P_H = 1 and Q_H = 1, the default eps, and a
  passed eps = 1e-3 in both functions (ignored, or not passed on from the loss), given alone or with
  one non-default bound (the others omitted at their defaults).
- test_mis_endpoints_are_inclusive: exact ties at both bounds in head, tail and token weights
  (neighbouring floats and log-space comparisons: test_t2_regimes).
- test_correction_is_not_reweighted / test_on_policy_correction_vanishes: where the correction goes
  (and one tensor as logp and rollout_logp: w_a = f(1), no on-policy shortcut).
- test_frozen_inputs_get_no_gradient / test_padding_is_neutralised / test_inputs_not_mutated:
  stop-gradients, NaN/inf/1e30 padding in every input (two fills a call, mixed across entries
  and inputs), no in-place writes.
- test_default_bounds: the defaults omitted in both functions.
"""

import math

import torch

from judge.testing import (Feedback, all_close, assert_close, assert_no_grad, backward_sums, batch, check_tensor,
                           describe, leaf, sibling, tolerance, visible)

cases = sibling(__file__, "_cases")
D = torch.float64
L2 = math.log(2.0)


def _full_centering(z, q, ids, mode, low, high, eps=1e-6):
    """mu_w = sum_v q_hat_v f(p_v / q_hat_v) (e_v - p) over the WHOLE vocabulary, with the sampler
    tail reconstructed as q_hat_v = rho * p_v off the head (rho with the eps floors)."""
    p = torch.softmax(z.detach(), -1)
    in_h = torch.zeros_like(p, dtype=torch.bool)
    in_h[ids] = True
    P, Q = p[in_h].sum(), q[in_h].sum()
    rho = torch.clamp(1 - Q, min=eps) / torch.clamp(1 - P, min=eps)
    q_hat = torch.where(in_h, q, rho * p)
    qw = q_hat * cases.is_rule(p / q_hat, mode, low, high)
    return qw - p * qw.sum()


def _logits_grad_of_correction(sub, z, log_q, ids, **kw):
    return _correction_grad(_queue_correction(sub, z, log_q, ids, **kw))


def _queue_correction(b, z, log_q, ids, **kw):
    """Queue sc_correction on the head of softmax(z) (in a batch ``b``); ``_correction_grad`` reads it."""
    z = leaf(z)
    return z, b.sc_correction(torch.log_softmax(z, -1)[ids], log_q[ids], **kw)


def _correction_grad(queued):
    """(c, d c / d logits) of a correction queued by ``_queue_correction``."""
    z, pending = queued
    c = pending.value
    c.backward()
    return c, z.grad


@visible
def test_seed_check_uncentered_mean(sub, ctx):
    """p = (0.6, 0.4), q = (0.5, 0.5), s_a = e_a - p: the uncentred mean is q - p = (-0.1, 0.1)."""
    z0 = torch.tensor([0.6, 0.4], dtype=D).log()
    log_q = torch.tensor([0.5, 0.5], dtype=D).log()
    ids = torch.tensor([0, 1])
    with batch(sub) as b:
        correction = _queue_correction(b, z0, log_q, ids)
        # Token-mean over a = 0 and a = 1 is the expectation under q = (0.5, 0.5): with A = 1 the
        # centred score has expectation zero, so the loss gradient w.r.t. the logits is 0.
        z = leaf(z0)
        lp = torch.log_softmax(z, -1)
        pending = b.sc_policy_loss(lp.unsqueeze(-1), log_q.unsqueeze(-1), lp.expand(2, 2).unsqueeze(1),
                                   log_q.expand(2, 2).unsqueeze(1), torch.ones(2, dtype=D),
                                   torch.ones(2, 1, dtype=torch.bool))
    _, g = _correction_grad(correction)
    assert_close(g, torch.tensor([-0.1, 0.1], dtype=D),
                 what="d c / d logits for a whole-vocabulary head (must be the mean score mu = q - p)",
                 inputs=dict(p=torch.tensor([0.6, 0.4]), q=torch.tensor([0.5, 0.5]), head="{0, 1}"))
    loss = pending.value
    loss.backward()
    assert_close(z.grad, torch.zeros(2, dtype=D), atol=1e-12,
                 what="d loss / d logits averaged over a ~ q with A = 1 (E_q[s_a - mu] = 0; without "
                      "centring it would be p - q = (0.1, -0.1))",
                 inputs=dict(p=torch.tensor([0.6, 0.4]), q=torch.tensor([0.5, 0.5]), tokens="a = 0 and a = 1"))


HAND_Z = [0.4, -0.2, 0.8, -0.5]
HAND_Q = [0.45, 0.10, 0.35, 0.10]
HAND_IDS = [0, 2]


@visible
def test_hand_checked_case(sub, ctx):
    """logits [.4, -.2, .8, -.5], q = [.45, .1, .35, .1], H = {0, 2}, mode none:
    P_H = .722853, Q_H = .8, alpha = .721640, coefficients [.240659, .037701], c = -.329408,
    d c / d logits = [.15991, -.044316, -.082763, -.03283]."""
    z = torch.tensor(HAND_Z, dtype=D)
    log_q = torch.tensor(HAND_Q, dtype=D).log()
    ids = torch.tensor(HAND_IDS)
    inputs = dict(logits=z, q=torch.tensor(HAND_Q, dtype=D), head="H = {0, 2}", mode="none")
    th = leaf(torch.log_softmax(z, -1)[ids])
    with batch(sub) as b:
        pending = b.sc_correction(th, log_q[ids])
        logits = _queue_correction(b, z, log_q, ids)
    c = pending.value
    assert_close(c, torch.tensor(-0.32940826701098097, dtype=D),
                 what="correction value c (hand-checked: -0.329408)", inputs=inputs)
    c.backward()
    assert_close(th.grad, torch.tensor([0.240659498074767, 0.03770066901131741], dtype=D),
                 what="head coefficients d c / d log p_v = sg(q_v - alpha p_v) (hand-checked: [.240659, .037701]; "
                      "alpha = (1 - Q_H)/(1 - P_H) = .721640)", inputs=inputs)
    _, g = _correction_grad(logits)
    assert_close(g, torch.tensor([0.1599099961265508, -0.044316266277978314,
                                  -0.08276343231726341, -0.03283029753130911], dtype=D),
                 what="d c / d logits (hand-checked: [.15991, -.044316, -.082763, -.03283])", inputs=inputs)


@visible
def test_tail_weight_alpha_prime(sub, ctx):
    """Two positions, head ratios p/q in [.25, 2]; alpha' = rho f(1/rho) clamps 1/rho at both ends.
    Row 0: P_H = .5, Q_H = .9: rho = .1/.5 = .2, 1/rho = 5 > high: none .2, tis .2 * 2 = .4,
    mis .2 * 0 = 0 (5 is out of band). Row 1: P_H = .9, Q_H = .55: rho = .45/.1 = 4.5, 1/rho = .22
    < low: none 4.5, tis 4.5 * .25 = 1.125, mis 0."""
    p = torch.tensor([[0.3, 0.2], [0.45, 0.45]], dtype=D)
    q = torch.tensor([[0.45, 0.45], [0.3, 0.25]], dtype=D)
    th0, sh = p.log(), q.log()
    alpha = {"none": (0.2, 4.5), "tis": (0.4, 1.125), "mis": (0.0, 0.0)}
    expected = {mode: (q if mode == "none" else p) - torch.tensor(a, dtype=D).unsqueeze(-1) * p
                for mode, a in alpha.items()}  # in band, q f(p/q) = p for tis and mis
    with batch(sub) as b:
        runs = []
        for mode in expected:
            th = leaf(th0)
            runs.append((th, b.sc_correction(th, sh, mode=mode, low=0.25, high=2.0)))
    values = [pending.value for _, pending in runs]
    backward_sums(values)  # one round trip for the three [2] outputs
    for (mode, coef), (th, _), c in zip(expected.items(), runs, values):
        assert_close(th.grad, coef,
                     what=f"head coefficients q_v f(p_v/q_v) - alpha' p_v with alpha' = rho f(1/rho) (mode={mode!r}; "
                          f"row 0: 1/rho = 5 above high, row 1: 1/rho = .22 below low)",
                     inputs=dict(p_head=p, q_head=q, mode=mode, low=0.25, high=2.0))
        assert_close(c, (coef * th0).sum(-1), what=f"correction value (mode={mode!r})",
                     inputs=dict(p_head=p, q_head=q, mode=mode, low=0.25, high=2.0))


BOUNDS = {"none": (0.0, 2.0), "tis": (0.7, 1.3), "mis": (0.6, 1.5)}


def _no_grad_is_feedback(x, what):
    """Feedback when the leaf ``x`` (train_head_logp, or the logits it is built from) got no gradient."""
    if x.grad is None:
        raise Feedback(f"{what}: no gradient reached train_head_logp (the result is detached from it)")


@visible
def test_gradient_identity_full_vocabulary_centering(sub, ctx):
    """-grad l = A (w_a s_a - mu_w) with mu_w the full-vocabulary weighted mean score under q_hat.

    Per mode, three prefixes (each its own p, q and head; the first samples a head token, the
    others a ~ q) in one call of each function: sc_correction on heads [3, k] and sc_policy_loss
    on 3 one-token responses, whose token-mean makes each prefix's gradient a third of its own."""
    g = ctx.generator(201)
    V, k, n = 7, 3, 3
    runs = []
    with batch(sub) as b:
        for mode, (low, high) in BOUNDS.items():
            drawn = []
            for trial in range(n):
                log_p, log_q = cases.distributions(g, (), V, spread=1.0, mismatch=0.8)
                ids = cases.head_ids(g, log_q, k)
                q = log_q.exp()
                a = int(torch.multinomial(q, 1, generator=g)) if trial else int(ids[0])
                A = float(torch.randn((), generator=g, dtype=D))
                drawn.append((log_p, log_q, ids, a, A))
            z0 = torch.stack([d[0] for d in drawn])                 # [n, V]: logits whose softmax is p
            log_q = torch.stack([d[1] for d in drawn])
            ids = torch.stack([d[2] for d in drawn])                # [n, k]
            a = torch.tensor([[d[3]] for d in drawn])               # [n, 1]
            A = torch.tensor([d[4] for d in drawn], dtype=D)        # [n]
            zc = leaf(z0)
            correction = b.sc_correction(cases.log_softmax(zc).gather(-1, ids), log_q.gather(-1, ids),
                                         mode=mode, low=low, high=high)
            z = leaf(z0)
            lp = cases.log_softmax(z)                               # [n, V]: torch's splits the rows over threads
            loss = b.sc_policy_loss(lp.gather(-1, a), log_q.gather(-1, a), lp.gather(-1, ids).unsqueeze(1),
                                    log_q.gather(-1, ids).unsqueeze(1), A, torch.ones(n, 1, dtype=torch.bool),
                                    mode=mode, low=low, high=high)
            runs.append((mode, low, high, z0, log_q, ids, a, A, zc, correction, z, loss))
    # every correction's sum().backward() in one pass (one round trip); row r's reaches z0[r] only
    backward_sums([check_tensor(correction.value, what=f"sc_correction on heads of shape ({n}, {k}) (mode={mode!r})",
                                shape=(n,)) for mode, *_, correction, _, _ in runs])
    for mode, low, high, z0, log_q, ids, a, A, zc, correction, z, loss in runs:
        loss.value.backward()
        _no_grad_is_feedback(zc, f"sc_correction (mode={mode!r})")
        _no_grad_is_feedback(z, f"sc_policy_loss (mode={mode!r})")
        for r in range(n):
            q = log_q[r].exp()
            mu = _full_centering(z0[r], q, ids[r], mode, low, high)
            inputs = dict(logits=z0[r], q=q, head=ids[r], mode=mode, low=low, high=high)
            assert_close(zc.grad[r], mu, inputs=inputs,
                         what=f"d c / d logits vs the full-vocabulary centring mu_w under q_hat (mode={mode!r})")
            p = torch.softmax(z0[r], -1)
            t = int(a[r])
            w_a = cases.is_rule((p[t] / q[t]).reshape(1), mode, low, high)[0]
            s_a = -p.clone()
            s_a[t] += 1
            assert_close(-n * z.grad[r], float(A[r]) * (w_a * s_a - mu), inputs=inputs,
                         what=f"-d loss / d logits vs A (w_a s_a - mu_w) (mode={mode!r}, token a={t}, "
                              f"A={float(A[r]):.4g}; one of {n} one-token responses, so n * the gradient)")


@visible
def test_whole_vocabulary_head_is_exact(sub, ctx):
    """With H = the whole vocabulary the gradient is the exact centring sum_v q_v f(p_v/q_v) s_v, no NaN."""
    g = ctx.generator(202)
    V = 5
    runs = []
    with batch(sub) as b:
        for dtype in (torch.float64, torch.float32):
            for mode, (low, high) in BOUNDS.items():
                log_p, log_q = cases.distributions(g, (), V)
                ids = torch.randperm(V, generator=g)
                z0, log_q = log_p.to(dtype), log_q.to(dtype)
                runs.append((dtype, mode, low, high, z0, log_q,
                             _queue_correction(b, z0, log_q, ids, mode=mode, low=low, high=high)))
    for dtype, mode, low, high, z0, log_q, correction in runs:
        q = log_q.to(D).exp()
        p = torch.softmax(z0.to(D), -1)
        qw = q * cases.is_rule(p / q, mode, low, high)
        exact = qw - p * qw.sum()
        c, gz = _correction_grad(correction)
        inputs = dict(logits=z0, q=q, head="the whole vocabulary", mode=mode)
        if not (bool(torch.isfinite(c).all()) and bool(torch.isfinite(gz).all())):
            raise Feedback(f"a whole-vocabulary head (P_H = Q_H = 1 up to rounding, mode={mode!r}, {dtype}) "
                           f"gave a non-finite correction {describe(c)} or gradient {describe(gz)}: "
                           f"floor 1 - P_H and 1 - Q_H at eps")
        assert_close(gz, exact, what=f"d c / d logits for a whole-vocabulary head (mode={mode!r})",
                     inputs=inputs)


# test_eps_floors_keep_extremes_finite's bounds per mode (tis's high 1.6, mis's low 0.5 not the defaults)
BOUNDS = {"none": (0.0, 2.0), "tis": (0.0, 1.6), "mis": (0.5, 2.0)}


def _eps_kw(mode, eps):
    """The keywords of an eps call there: eps with what equals its spec default (mode "none",
    low 0, high 2) left out, so eps and each non-default bound are passed alone."""
    low, high = BOUNDS[mode]
    full = dict(mode=mode, low=low, high=high, eps=eps)
    return {key: v for key, v in full.items() if v != cases.DEFAULTS[key]}


def test_eps_floors_keep_extremes_finite(sub, oracle, ctx):
    """P_H = 1 exactly with Q_H = .8 (rho = .2/eps), P_H = 1 - 1e-12, and Q_H = 1 exactly with P_H = .6:
    the three heads in one call per mode (leading shape [3]; each position's floors its own).
    Each mode also with eps = 1e-3 passed (not the default) on those heads and a fourth, tail
    masses 1 - P_H = 1.5e-3, 1 - Q_H = 5e-4: rho = 1/3 under the default eps, 2/3 under 1e-3
    (1/rho = 3 is outside mis's band [0.5, 2], 1.5 inside); and one sc_policy_loss call per mode
    with eps = 1e-3 on the same heads: an eps that is ignored, or not passed from the loss to the
    correction (in any one mode's branch), changes the value. The eps = 1e-3 calls (both functions)
    give eps with something left out at its spec default: "none" passes eps alone (mode, low and
    high omitted), "tis" [0, 1.6] omits low, "mis" [0.5, 2] omits high, so eps and each bound are
    also passed alone (a solution that reads eps only when the mode or a bound is given, or one
    bound only when the other is, is off: 1/rho = 5e-6 ... 3 and head ratios 5/3 lie between the
    given and the default bounds)."""
    rows = [
        ("P_H = 1 exactly, Q_H = 0.8", [0.5, 0.5], [0.5, 0.3]),
        ("P_H = 1 - 1e-12, Q_H = 0.8", [0.5, 0.5 - 1e-12], [0.5, 0.3]),
        ("Q_H = 1 exactly, P_H = 0.6", [0.3, 0.3], [0.5, 0.5]),
        ("P_H = 1 - 1.5e-3, Q_H = 1 - 5e-4", [0.5, 0.5 - 1.5e-3], [0.5, 0.5 - 5e-4]),
    ]
    th0 = torch.tensor([p for _, p, _ in rows], dtype=D).log()           # [4, 2]
    sh = torch.tensor([q for _, _, q in rows], dtype=D).log()
    runs = []
    with batch(sub) as b:
        for mode in ("none", "tis", "mis"):
            low, high = BOUNDS[mode]
            for eps in (None, 1e-3):  # None: eps omitted, the default 1e-6
                n = 3 if eps is None else 4
                th = leaf(th0[:n])
                kw = dict(mode=mode, low=low, high=high) if eps is None else _eps_kw(mode, eps)
                runs.append((mode, low, high, eps, n, th, b.sc_correction(th, sh[:n], **kw)))
        loss_args = (torch.log(torch.tensor([[0.3, 0.45, 0.2, 0.5]], dtype=D)),
                     torch.log(torch.tensor([[0.25, 0.3, 0.35, 0.5]], dtype=D)),
                     th0.unsqueeze(0), sh.unsqueeze(0), torch.tensor([1.5], dtype=D),
                     torch.ones(1, 4, dtype=torch.bool))
        # every mode: a loss that passes eps on in one mode's branch only is off in the others
        losses = []
        for mode in ("none", "tis", "mis"):
            loss_kw = dict(mode=mode, low=BOUNDS[mode][0], high=BOUNDS[mode][1], eps=1e-3)
            x, xh = leaf(loss_args[0]), leaf(loss_args[2])
            losses.append((loss_kw, x, xh, b.sc_policy_loss(x, loss_args[1], xh, *loss_args[3:],
                                                            **_eps_kw(mode, 1e-3))))
    def passed_as(mode, eps):
        if eps is None:
            return "eps omitted (default 1e-6)"
        return f"eps={eps} passed{cases.omitted_note(dict(mode=mode, low=0, high=0), _eps_kw(mode, eps))}"

    values = [check_tensor(pending.value, what=f"sc_correction on heads of shape ({n}, 2) (mode={mode!r}, "
                                               f"{passed_as(mode, eps)})", shape=(n,))
              for mode, low, high, eps, n, th, pending in runs]
    # every c.sum().backward() in one pass (one round trip); row r's gradient reaches th[r] only
    backward_sums(values)
    for (mode, low, high, eps, n, th, pending), c in zip(runs, values):
        eps_kw = {} if eps is None else dict(eps=eps)
        passed = passed_as(mode, eps)
        _no_grad_is_feedback(th, f"sc_correction (mode={mode!r})")
        kw = dict(mode=mode, low=low, high=high, **eps_kw)
        want_c, want_g = oracle.sc_correction_and_coefficients(th0[:n], sh[:n], **kw)
        got_c, got_g = c.detach().double(), th.grad.double()
        # every row at once first, at the float64 tolerance (no looser than assert_close's below)
        rtol, atol = tolerance(D)
        if all_close(got_c, want_c, rtol=rtol, atol=atol) and all_close(got_g, want_g, rtol=rtol, atol=atol):
            continue
        for r, (what, p, q) in enumerate(rows[:n]):  # a mismatch: name its row
            inputs = dict(p_head=torch.tensor(p, dtype=D), q_head=torch.tensor(q, dtype=D), mode=mode,
                          low=low, high=high, eps=eps or 1e-6)
            if not (math.isfinite(float(c[r].detach())) and bool(torch.isfinite(th.grad[r]).all())):
                raise Feedback(f"{what} (mode={mode!r}): the correction must stay finite thanks to the floors "
                               f"rho = max(1 - Q_H, eps) / max(1 - P_H, eps); got c = {describe(c[r])}, "
                               f"gradient {describe(th.grad[r])}")
            assert_close(c[r], want_c[r], what=f"correction value with {what} (mode={mode!r}, {passed}; both tail "
                                               f"masses floored at eps)", inputs=inputs)
            assert_close(th.grad[r], want_g[r], what=f"head coefficients with {what} (mode={mode!r}, {passed})",
                         inputs=inputs)
    shown = dict(zip(("logp", "rollout_logp", "train_head_logp", "sampler_head_logp", "advantages", "mask"),
                     loss_args))
    outs = [pending.value for *_, pending in losses]
    backward_sums(outs)  # one pass for the three 0-d losses
    for (loss_kw, x, xh, _), out in zip(losses, outs):
        call = ", ".join(f"{key}={v!r}" for key, v in _eps_kw(loss_kw["mode"], 1e-3).items())
        what = (f"sc_policy_loss({call}) on the four heads above (eps reaches the correction; "
                f"{', '.join(f'{key}={loss_kw[key]!r}' for key in ('mode', 'low', 'high'))} expected)")
        want, g_logp, g_head = oracle.sc_policy_loss_and_grads(*loss_args, **loss_kw)
        assert_close(out, want, what=what, inputs=shown)
        if xh.grad is None:
            raise Feedback(f"{what}: no gradient reached train_head_logp")
        assert_close(xh.grad, g_head, what=f"d loss / d train_head_logp, {what}", inputs=shown)


def test_mis_endpoints_are_inclusive(sub, ctx):
    """mis keeps ratios equal to low or high (closed band, slime's "mis" / IcePop), in the head,
    in the tail factor f(1/rho) and in the sampled-token weight w_a.

    One-token heads whose masses are powers of two: 1 - P_H and 1 - Q_H are then exact however
    they are computed (1 - sum exp, -expm1(logsumexp)), so every standard formulation meets the
    same ties. Head rows (band [.5, 2]): p/q = 2 = high (p = .5, q = .25; 1/rho = 2/3 inside) and
    p/q = .5 = low (p = .25, q = .5; 1/rho = 1.5 inside); p = q = .5 (head ratio 1, rho = 1) under
    the bands [1, 2] and [.5, 1]: the head ratio and 1/rho both on the bound. Every coefficient
    q w - alpha' p is 0 with the endpoints kept; a dropped endpoint gives -.5, -.25 or +.5."""
    runs = []
    with batch(sub) as b:
        for dtype in (torch.float64, torch.float32):
            l2 = torch.tensor(L2, dtype=dtype)
            if not ((l2.exp() == 2.0) and ((-l2).exp() == 0.5) and ((-2 * l2).exp() == 0.25)):
                raise RuntimeError("test setup: exp(+-log 2) is not exact in this dtype")
            heads = []
            for th0, sh, (low, high) in ((torch.stack([-l2, -2 * l2]).reshape(2, 1),
                                          torch.stack([-2 * l2, -l2]).reshape(2, 1), (0.5, 2.0)),
                                         ((-l2).reshape(1, 1), (-l2).reshape(1, 1), (1.0, 2.0)),
                                         ((-l2).reshape(1, 1), (-l2).reshape(1, 1), (0.5, 1.0))):
                th = leaf(th0)
                heads.append((th, low, high, b.sc_correction(th, sh, mode="mis", low=low, high=high)))
            # sampled-token weights at the endpoints: ratios 2 and .5
            logp = leaf(torch.stack([-l2, -2 * l2]).reshape(1, 2))
            rollout = torch.stack([-2 * l2, -l2]).reshape(1, 2)
            same = torch.stack([-l2, -l2]).expand(1, 2, 2)  # p = q on the head: correction 0
            loss = b.sc_policy_loss(logp, rollout, same, same.clone(), torch.ones(1, dtype=dtype),
                                    torch.ones(1, 2, dtype=torch.bool), mode="mis", low=0.5, high=2.0)
            runs.append((dtype, heads, logp, loss))
    backward_sums([correction.value for _, heads, _, _ in runs for *_, correction in heads])  # one round trip
    for dtype, heads, logp, pending in runs:
        for th, low, high, correction in heads:
            # float32: an implementation that compares the ratios in float32 (as it must) but forms
            # q w - alpha' p in float64 from the float32 log-probs (exp(-fl32(log 2)) is
            # 0.5 (1 + ~1e-8) there) cancels only to ~1e-9: 1e-7 admits it and is still 2.5e6
            # times below a dropped endpoint's coefficient (.25, .5).
            assert_close(th.grad, torch.zeros_like(th.grad), atol=1e-12 if dtype == torch.float64 else 1e-7,
                         what=f"head coefficients q w - alpha' p (mode='mis', low={low}, high={high}) with "
                              f"ratios exactly on the bounds ({dtype}; both endpoints are kept: the band is closed)",
                         inputs=dict(p_head=th.detach().exp().reshape(-1).tolist(), mode="mis", low=low, high=high))
        loss = pending.value
        loss.backward()
        assert_close(logp.grad, torch.tensor([[-1.0, -0.25]], dtype=dtype),
                     what="d loss / d logp = -A w_a / N for token ratios exactly 2 = high and .5 = low "
                          "(w_a = [2, .5]: both endpoints kept)",
                     inputs=dict(ratios=[2.0, 0.5], mode="mis", low=0.5, high=2.0, A=1.0))


def test_correction_is_not_reweighted(sub, ctx):
    """The correction is added after IS weighting: its gradient is A coef / N, never A w_a coef / N."""
    th0 = torch.tensor([0.3, 0.2], dtype=D).log()
    sh = torch.tensor([0.45, 0.25], dtype=D).log()
    runs = []
    with batch(sub) as b:
        for mode, (low, high) in (("tis", (0.0, 2.0)), ("mis", (0.2, 2.0))):
            logp = leaf(torch.tensor([[math.log(0.3)]], dtype=D))
            rollout = torch.tensor([[math.log(0.2)]], dtype=D)  # w_a = 1.5
            th = leaf(th0.reshape(1, 1, 2))
            loss = b.sc_policy_loss(logp, rollout, th, sh.reshape(1, 1, 2), torch.tensor([2.0], dtype=D),
                                    torch.ones(1, 1, dtype=torch.bool), mode=mode, low=low, high=high)
            probe = leaf(th0)
            runs.append((mode, logp, th, loss, probe, b.sc_correction(probe, sh, mode=mode, low=low, high=high)))
    for mode, logp, th, loss, probe, correction in runs:
        loss.value.backward()
        correction.value.backward()
        assert_close(th.grad.reshape(2), 2.0 * probe.grad,
                     what=f"d loss / d train_head_logp = A * (d c / d train_head_logp) (mode={mode!r}, w_a = 1.5: "
                          f"the correction is not multiplied by w_a)",
                     inputs=dict(A=2.0, w_a=1.5, mode=mode))
        assert_close(logp.grad, torch.tensor([[-3.0]], dtype=D),
                     what=f"d loss / d logp = -A w_a (mode={mode!r}, A = 2, w_a = 1.5)", inputs=dict(A=2.0, w_a=1.5))


def test_on_policy_correction_vanishes(sub, ctx):
    """q = p on the head: rho = 1, alpha' = f(1), every coefficient p f(1) - f(1) p = 0. And the
    loss given one tensor as logp and rollout_logp (and one as both heads), "tis" with low = 1.5:
    every token ratio is 1, so w_a = f(1) = 1.5 (not 1: no on-policy shortcut), the correction 0."""
    g = ctx.generator(203)
    th0, *_ = cases.heads(g, (3,), 8, 4)
    runs = []
    with batch(sub) as b:
        for mode, (low, high) in BOUNDS.items():
            th = leaf(th0)
            runs.append((mode, th, b.sc_correction(th, th0.clone(), mode=mode, low=low, high=high)))
        same = leaf(th0[:, :2].T.contiguous())                                   # [2, 3] log-probs
        heads = th0.unsqueeze(0).expand(2, 3, 4)
        adv = torch.tensor([1.0, -2.0], dtype=D)
        mask = torch.tensor([[True, True, False], [True, True, True]])
        loss = b.sc_policy_loss(same, same, heads, heads, adv, mask, mode="tis", low=1.5, high=2.0)
    backward_sums([pending.value for _, _, pending in runs])  # every c.sum().backward(), one round trip
    for mode, th, pending in runs:
        c = pending.value
        assert_close(c, torch.zeros(3, dtype=D), atol=1e-12,
                     what=f"correction when sampler head == trainer head (mode={mode!r})",
                     inputs=dict(train_head_logp=th0, mode=mode))
        assert_close(th.grad, torch.zeros(3, 4, dtype=D), atol=1e-12,
                     what=f"d c / d train_head_logp when sampler head == trainer head (mode={mode!r})",
                     inputs=dict(train_head_logp=th0, mode=mode))
    what = ("sc_policy_loss(logp, logp, heads, heads, ..., mode='tis', low=1.5, high=2) (one tensor as logp and "
            "rollout_logp: every ratio 1, w_a = clamp(1, 1.5, 2) = 1.5)")
    m = mask.to(D)
    a = adv.unsqueeze(-1) * m
    out = loss.value
    assert_close(out, -(a * 1.5 * torch.where(mask, same.detach(), 0.0)).sum() / 5, what=what,
                 inputs=dict(logp=same.detach(), mask=mask, advantages=adv))
    out.backward()
    assert_close(same.grad, -a * 1.5 / 5, what=f"d loss / d logp = -m A w_a / N, {what}",
                 inputs=dict(logp=same.detach(), mask=mask, advantages=adv))


@visible
def test_frozen_inputs_get_no_gradient(sub, ctx):
    g = ctx.generator(204)
    t, kw = cases.loss_case(g, 3, 4, 7, 3, D, 1)
    runs = []
    with batch(sub) as b:
        for mode, (low, high) in BOUNDS.items():
            frozen = {n: leaf(t[n]) for n in ("rollout_logp", "sampler_head_logp", "advantages")}
            args = {**t, **frozen, "logp": leaf(t["logp"]), "train_head_logp": leaf(t["train_head_logp"])}
            loss = b.sc_policy_loss(**args, mode=mode, low=low, high=high)
            sh = leaf(t["sampler_head_logp"][:1, :1])
            correction = b.sc_correction(leaf(t["train_head_logp"][:1, :1]), sh, mode=mode, low=low, high=high)
            runs.append((mode, frozen, loss, sh, correction))
    for mode, frozen, loss, sh, correction in runs:
        loss.value.backward()
        for n, x in frozen.items():
            assert_no_grad(x, what=f"{n} (sc_policy_loss, mode={mode!r})")
        correction.value.sum().backward()
        assert_no_grad(sh, what=f"sampler_head_logp (sc_correction, mode={mode!r})")


def _two_fills(x, mask, fills, flip):
    """``x`` [B, L] or [B, L, k] with its padded entries (``mask`` [B, L] False) holding ``fills[0]``
    and ``fills[1]`` in turn (swapped when ``flip``)."""
    pad = ~mask if x.dim() == 2 else (~mask).unsqueeze(-1).expand_as(x)
    first = (torch.arange(x.numel()).reshape(x.shape) % 2 == 0) ^ flip
    return x.masked_fill(pad & first, fills[0]).masked_fill(pad & ~first, fills[1])


@visible
def test_padding_is_neutralised(sub, ctx):
    """Masked positions may hold NaN / inf / 1e30 anywhere, heads included: the loss and the
    gradients equal those of the same batch with harmless padding, and padded gradients are 0."""
    g = ctx.generator(205)
    clean, _ = cases.loss_case(g, 3, 4, 6, 3, D, 2, pad=False)
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)
    clean["mask"] = mask
    # the clean batch, then two with two fills each, alternating over the padded entries and
    # shifted from one input to the next (a position may hold NaN in logp and -inf in its heads)
    fills = (None, (float("nan"), -float("inf")), (float("inf"), 1e30))
    runs = {mode: [] for mode in BOUNDS}
    with batch(sub) as b:
        for mode, (low, high) in BOUNDS.items():
            kw = dict(mode=mode, low=low, high=high)
            for fill in fills:
                padded = dict(clean)
                if fill is not None:
                    for k, n in enumerate(("logp", "rollout_logp", "train_head_logp", "sampler_head_logp")):
                        padded[n] = _two_fills(clean[n], mask, fill, flip=k % 2 == 1)
                logp, head = leaf(padded["logp"]), leaf(padded["train_head_logp"])
                pending = b.sc_policy_loss(**{**padded, "logp": logp, "train_head_logp": head}, **kw)
                runs[mode].append((fill, logp, head, pending))
    for mode, (low, high) in BOUNDS.items():
        kw = dict(mode=mode, low=low, high=high)
        reference = None
        for fill, logp, head, pending in runs[mode]:
            loss = pending.value
            loss.backward()
            if reference is None:
                reference = (loss.detach(), logp.grad, head.grad)
                continue
            shown = " and ".join(map(str, fill))
            inputs = dict(mask=mask, padding=shown, **kw)
            assert_close(loss, reference[0], what=f"loss with padding = {shown} (vs the same batch with "
                         f"finite padding)", inputs=inputs)
            for i, n, x in ((1, "logp", logp), (2, "train_head_logp", head)):
                pad = ~mask if i == 1 else (~mask).unsqueeze(-1).expand_as(x)
                if not bool(torch.isfinite(x.grad).all()) or bool((x.grad[pad] != 0).any()):
                    raise Feedback(f"{n}.grad must be finite and exactly 0 at padded positions (padding = {shown}, "
                                   f"mode={mode!r}), got {describe(x.grad)}")
                assert_close(x.grad, reference[i], what=f"{n}.grad with padding = {shown}", inputs=inputs)


def test_default_bounds(sub, oracle, ctx):
    """The defaults low = 0.0, high = 2.0 apply to "tis" and "mis" when no bounds are passed.
    Head ratios p/q = [.5, 2.5] and token ratios [.5, 2.5] separate them from other defaults."""
    th = torch.tensor([0.1, 0.5], dtype=D).log()
    sh = torch.tensor([0.2, 0.2], dtype=D).log()
    logp0 = torch.tensor([[0.1, 0.5]], dtype=D).log()
    rollout = torch.tensor([[0.2, 0.2]], dtype=D).log()
    heads_p, heads_q = th.expand(1, 2, 2), sh.expand(1, 2, 2)
    adv, mask = torch.tensor([1.5], dtype=D), torch.ones(1, 2, dtype=torch.bool)
    runs = []
    with batch(sub) as b:
        for mode in ("tis", "mis"):
            logp = leaf(logp0)
            runs.append((mode, b.sc_correction(th, sh, mode=mode), logp,
                         b.sc_policy_loss(logp, rollout, heads_p, heads_q, adv, mask, mode=mode)))
    for mode, correction, logp, pending in runs:
        inputs = dict(p_head=th.exp(), q_head=sh.exp(), mode=mode, low="(default)", high="(default)")
        c = correction.value
        assert_close(c, oracle.sc_correction(th, sh, mode=mode, low=0.0, high=2.0),
                     what=f"sc_correction with the default bounds (mode={mode!r}: low = 0.0, high = 2.0)",
                     inputs=inputs)
        loss = pending.value
        args = (logp0, rollout, heads_p, heads_q, adv, mask)
        want, want_g, _ = oracle.sc_policy_loss_and_grads(*args, mode=mode, low=0.0, high=2.0)
        assert_close(loss, want,
                     what=f"sc_policy_loss with the default bounds (mode={mode!r}: low = 0.0, high = 2.0)",
                     inputs=inputs)
        loss.backward()
        assert_close(logp.grad, want_g,
                     what=f"d loss / d logp with the default bounds (mode={mode!r})", inputs=inputs)


def test_inputs_not_mutated(sub, ctx):
    g = ctx.generator(206)
    t, kw = cases.loss_case(g, 3, 3, 6, 3, torch.float32, 3)
    before = {n: x.clone() for n, x in t.items()}
    with batch(sub) as b:
        calls = [b.sc_policy_loss(**t, **kw), b.sc_correction(t["train_head_logp"][0], t["sampler_head_logp"][0], **kw)]
    for pending in calls:
        pending.value  # raises what the call raised, or names the input it wrote into (judge.readonly)
    for n, x in t.items():
        same = (x == before[n]) | (torch.isnan(x) & torch.isnan(before[n])) if x.is_floating_point() else x == before[n]
        if not bool(same.all()):
            raise Feedback(f"{n} was modified in place: before {describe(before[n])}, after {describe(x)}")
