"""The judge's faster loop for cispo's T3 toy (the learner's experiment.py is the plain one).

Every grading runs the toy through the sandbox, so the judge works while the submission computes:
the step's four calls (each anchor's loss, then its weights) go out in one batch, the second
anchor's tensors being made while the first's calls are computed; then come the next step's
random numbers and the previous step's statistics (vectorised over anchors and lanes, one
.tolist()); then the answers are read in order, each anchor taking its gradient step, and the
first anchor makes its next step's tensors while the second's calls are computed. A step's calls
go out only once every answer of the step before has been read and used: the same calls, with the
same arguments and in the same order, and the same metrics, as ``experiment._train``'s
step-by-step loop (tests/test_experiments.py checks that they are).
"""

from __future__ import annotations

from judge.testing import batch


def run(experiment, impl, out_dir=None, seed: int = 0) -> dict:
    """``experiment.run(impl, out_dir, seed)``, its lanes trained by ``train`` below."""
    return experiment.run(impl, out_dir, seed, train=lambda impl, z0, g: train(experiment, impl, z0, g))


def train(experiment, impl, z0, g) -> list:
    """``experiment._train``, with the judge's work overlapping the submission's."""
    x = experiment
    trainers = [x._Trainer(anchor, z0) for anchor in x.ANCHORS]
    first, later = trainers[0], trainers[1:]

    draw = x._Draw(g)
    first.prepare(0, draw)
    done, done_draw = [], draw            # the previous step's weights, for its statistics
    for step in range(x.STEPS):
        # One batch of 4 calls per step (one round trip under the judge): the anchors' lanes are
        # independent and the weights do not need the loss. Step t + 1 needs step t's update.
        with batch(impl) as b:
            first.send(b, draw)
            for tr in later:               # made while the sandbox computes the first's calls
                tr.prepare(step, draw)
                tr.send(b, draw)
        # While the sandbox computes: the next step's random numbers, the last step's statistics.
        this = draw
        if step + 1 < x.STEPS:
            draw = x._Draw(g)
        x._record_stats(done, done_draw)
        done, done_draw = [], this
        for tr in trainers:
            weights = tr.receive(step, this)
            if weights is not None:
                done.append((tr, weights))
            if tr is first and step + 1 < x.STEPS:  # while the sandbox computes the later anchors'
                first.prepare(step + 1, draw)
    x._record_stats(done, done_draw)
    return trainers
