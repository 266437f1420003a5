"""T3: the noisy-sampler toy (N=512, D=8, E=8, k=2) run through the submission."""

from judge.testing import Feedback, memo

# metrics that depend on the submission, compared with the reference's own run
_COMPARED = ("recompute_err_mean", "recompute_err_max", "replay_err_mean", "replay_err_max",
             "replay_err_flipped_max")


def _metrics(sub, experiment, ctx):
    # one toy run per grading, shared by every T3 test and cached on the run's Context
    # (judge.testing.memo is process-wide and keyed by value, which would mix up submissions graded
    # in the same process); this shared run is the one that writes the plots
    return ctx.once(("r3", "t3", "sub"), lambda: experiment.run(sub, ctx.out_dir))


def _close(a, b, rtol=1e-6, atol=1e-9):
    return abs(a - b) <= atol + rtol * abs(b)


def test_matches_reference_run(sub, ref, experiment, ctx):
    got = _metrics(sub, experiment, ctx)
    want = memo(("r3", "t3"), lambda: experiment.run(ref, None))
    for key in _COMPARED:
        for i, sigma in enumerate(want["sigmas"]):
            if not _close(got[key][i], want[key][i]):
                raise Feedback(f"toy metric {key} at sigma={sigma}: expected {want[key][i]:.6g} (the reference's "
                               f"run), got {got[key][i]:.6g}; all of {key}: expected "
                               f"{[round(v, 5) for v in want[key]]}, got {[round(v, 5) for v in got[key]]}")
    if got["same_route_max_diff"] > 1e-9:
        raise Feedback(f"tokens whose recorded expert SET equals the trainer's top-k (possibly in another column "
                       f"order) must give the same output under replay and recompute; the largest difference was "
                       f"{got['same_route_max_diff']:.3g}")


def test_replay_removes_route_flip_jumps(sub, experiment, ctx):
    m = _metrics(sub, experiment, ctx)
    s, f = m["sigmas"], m["flip_frac"]
    i1, i5 = s.index(0.01), s.index(0.05)
    # the toy itself: flips start at 0 and grow about linearly; recompute jumps by O(1)
    if f[0] != 0 or not (0.003 <= f[i1] <= 0.05) or not 2 <= f[i5] / max(f[i1], 1e-12) <= 12:
        raise Feedback(f"route flips should start at 0 and grow about linearly in sigma (about 1-2% at 0.01, "
                       f"5-8% at 0.05), got {f}")
    if m["recompute_err_mean"][0] > 1e-12 or m["replay_err_mean"][0] > 1e-12:
        raise Feedback(f"with sigma=0 the trainer and sampler agree exactly; got errors "
                       f"{m['recompute_err_mean'][0]:.3g} (recompute) and {m['replay_err_mean'][0]:.3g} (replay)")
    if m["recompute_err_max"][i1] < 0.5:
        raise Feedback(f"recomputing top-k should make O(1) jumps on flipped tokens at sigma=0.01, got max "
                       f"{m['recompute_err_max'][i1]:.4g}")
    # replay: far below recompute, and O(sigma) everywhere, flipped tokens included
    for i, sigma in enumerate(s):
        rec_mean, rep_mean = m["recompute_err_mean"][i], m["replay_err_mean"][i]
        rec_max, rep_max = m["recompute_err_max"][i], m["replay_err_max"][i]
        if f[i] > 0 and not (rep_mean < 0.6 * rec_mean and rep_max < 0.25 * rec_max):
            raise Feedback(f"at sigma={sigma} ({100 * f[i]:.2f}% of tokens flip their top-k set) replay should remove "
                           f"the route-flip jumps: expected replay error far below recompute, got replay mean/max "
                           f"{rep_mean:.4g}/{rep_max:.4g} vs recompute mean/max {rec_mean:.4g}/{rec_max:.4g} "
                           f"(is the recorded expert_idx really replayed?)")
        if rep_max > 15 * sigma + 1e-9 or m["replay_err_flipped_max"][i] > 15 * sigma + 1e-9:
            raise Feedback(f"replay's worst per-token error at sigma={sigma} should be O(sigma) (the gates move "
                           f"smoothly with the logits), got {rep_max:.4g} overall and "
                           f"{m['replay_err_flipped_max'][i]:.4g} on the flipped tokens "
                           f"(all maxima: {[round(v, 4) for v in m['replay_err_max']]})")
    r = m["replay_err_max"]
    if not 2.5 <= r[i5] / max(r[i1], 1e-12) <= 10:
        raise Feedback(f"replay's max error should grow about linearly in sigma: from sigma=0.01 to 0.05 expected "
                       f"a ratio near 5, got {r[i1]:.4g} -> {r[i5]:.4g}")
    # replay still trains the router: the recorded experts' logits get gradient, the others none
    if not m["router_grad_selected_norm"] > 1e-3:
        raise Feedback(f"in the toy, the replayed layer gave the recorded experts' router logits a gradient of norm "
                       f"{m['router_grad_selected_norm']:.3g}: replay must keep the gates differentiable")
    if m["router_grad_unselected_max"] > 1e-12:
        raise Feedback(f"in the toy, unrecorded experts' router logits received gradient up to "
                       f"{m['router_grad_unselected_max']:.3g}; they should get none")
