"""The proxy: a sandboxed submission's functions behave like local ones for the tests — values,
autograd, in-place mutation and exceptions cross the boundary; nothing else does."""

from __future__ import annotations

import pytest
import torch

from judge.errors import RemoteException, SubmissionFailure
from judge.exercise import Function, Limits
from judge.proxy import SubmissionProxy
from judge.proxy import prefetch_backward
from judge.testing import Feedback, backward_all, batch, expect_raises

SOURCE = '''
import torch

def scale_sum(x, m):                 # a scalar loss: its gradient travels with the result
    return (x * 3).where(m, 0.0).sum()

def double(x):                       # a vector output: backward makes a round trip
    return x * 2

def frozen(x, a):                    # `a` is detached, `x` is not
    return (x * a.detach()).sum()

def detached(x):
    return (x * 2).sum().detach()

def own_leaf(x):
    return torch.zeros((), requires_grad=True)

def mutate(x):
    x.add_(1)
    return x.sum()

def raise_value_error(x):
    raise ValueError("shapes [2] and [3] differ")

def as_float(x):
    return 1.0

def as_numpy(x):
    return x.detach().numpy()

class Liar(torch.Tensor):
    pass

def as_subclass(x):
    return x.detach().as_subclass(Liar)

def pair(x):
    return x.sum(), (x * 2).detach()

def exits(x):
    raise SystemExit(0)

def mutate_view(x):                  # a write through an alias of the input's memory
    x.view(-1)[0] = 7
    return x.sum()

def resize(x):                       # same bytes, other shape
    x.resize_(1)
    return x.sum()

def second_only(x, y):
    y.mul_(2)
    return x.sum()

def fill(buf, value):                # declared as writing `buf` (exercise.toml: writes)
    buf.fill_(value)
    return buf.sum()

def layout(x):                       # what the child received: strides and contiguity
    return torch.tensor(list(x.stride()) + [int(x.is_contiguous())])

class _Refuses(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        raise ValueError("no gradient today")

def bad_backward(x):                 # its backward pass raises in the child
    return _Refuses.apply(x)

def same(x, y):                      # one tensor passed twice is one object in the child too
    return (x * y).sum() + (1.0 if x is y else 0.0)

def unflag(x, y):                    # flips requires_grad on both inputs
    x.requires_grad_(False)
    y.requires_grad_(True)
    return (x * 2).detach()
'''
NAMES = ["scale_sum", "double", "frozen", "detached", "own_leaf", "mutate", "raise_value_error",
         "as_float", "as_numpy", "as_subclass", "pair", "exits", "mutate_view", "resize",
         "second_only", "fill", "layout", "unflag", "bad_backward", "same"]
SIGNATURES = {"mutate": "mutate(x) -> Tensor", "second_only": "second_only(x, y) -> Tensor",
              "same": "same(x, y) -> Tensor",
              "fill": "fill(buf, value) -> Tensor", "unflag": "unflag(x, y) -> Tensor"}


@pytest.fixture
def sub(sandbox):
    job = sandbox.open_job(Limits(call_seconds=5, total_seconds=30))
    msg = job.request({"op": "load", "source": SOURCE, "functions": NAMES}, during="load")
    assert msg.header["ok"] and not msg.header["missing"]
    returns = {"pair": "any"}
    yield SubmissionProxy(job, [Function(n, SIGNATURES.get(n, n), returns.get(n, "tensor"),
                                         ("buf",) if n == "fill" else ()) for n in NAMES])
    job.close()


def test_scalar_loss_gradient_reaches_the_leaf(sub):
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([True, False, True])
    loss = sub.scale_sum(x, m)
    assert loss.dtype == torch.float64 and loss.shape == () and loss.item() == 12.0
    (loss * 2).backward()  # d(loss) = 2: the eagerly sent gradient is scaled
    assert x.grad.tolist() == [6.0, 0.0, 6.0]


def test_gradients_flow_into_the_tests_own_graph(sub):
    logits = torch.tensor([0.5, -1.0], requires_grad=True)
    x = torch.log_softmax(logits, -1)  # a non-leaf input
    y = sub.double(x)
    assert y.requires_grad and y.grad_fn is not None
    (y * torch.tensor([1.0, 0.0])).sum().backward()  # a vector output: a round trip
    expected = torch.autograd.grad((2 * torch.log_softmax(logits, -1) * torch.tensor([1.0, 0.0])).sum(),
                                   logits)[0]
    assert torch.allclose(logits.grad, expected)


def test_frozen_inputs_get_no_gradient(sub):
    x = torch.ones(3, requires_grad=True)
    a = torch.full((3,), 2.0, requires_grad=True)
    sub.frozen(x, a).backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0] and a.grad is None


def test_a_detached_result_comes_back_detached(sub):
    x = torch.ones(3, requires_grad=True)
    assert not sub.detached(x).requires_grad
    leaf = sub.own_leaf(x)  # requires grad, but is connected to nothing
    assert leaf.requires_grad
    leaf.backward()
    assert x.grad is None


def test_a_write_into_a_read_only_input_fails_the_call_and_leaves_it_pristine(sub):
    x = torch.zeros(3)
    with pytest.raises(Feedback, match=r"mutate modified its input\(s\) in place:\n  `x` written at 3 of 3 "
                                       r"positions: 0: 0 -> 1, 1: 0 -> 1, 2: 0 -> 1"):
        sub.mutate(x)
    assert x.tolist() == [0.0, 0.0, 0.0]  # what the test sent: its expectations come from it
    assert len(sub.violations.take()) == 1  # recorded for the runner, which fails the test


def test_writes_are_found_through_aliases_and_resizes_and_named(sub):
    x = torch.zeros(2, 2)
    with pytest.raises(Feedback, match=r"`argument 1` written at 1 of 4 positions: \(0, 0\): 0 -> 7"):
        sub.mutate_view(x)
    assert x.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    y = torch.ones(3)
    with pytest.raises(Feedback, match="resized or retyped in place"):
        sub.resize(y)
    assert y.tolist() == [1.0, 1.0, 1.0]
    a, b = torch.ones(2), torch.ones(2)
    with pytest.raises(Feedback, match="`y` written at 2 of 2") as e:
        sub.second_only(a, b)  # only the input that changed is named
    assert "`x`" not in str(e.value) and b.tolist() == [1.0, 1.0]


def test_an_input_declared_written_is_copied_back(sub):
    buf = torch.zeros(3)
    assert sub.fill(buf, 2.0).item() == 6.0
    assert buf.tolist() == [2.0, 2.0, 2.0] and not sub.violations.take()


def test_flipping_requires_grad_of_an_input_is_reported(sub):
    x, y = torch.ones(2, requires_grad=True), torch.ones(2)
    with pytest.raises(Feedback) as e:
        sub.unflag(x, y)
    assert "`x` had its requires_grad flag changed from True to False" in str(e.value)
    assert "`y` had its requires_grad flag changed from False to True" in str(e.value)
    assert x.requires_grad and not y.requires_grad


def test_non_contiguous_inputs_reach_the_child_with_their_strides(sub):
    base = torch.arange(12.0).reshape(3, 4)
    for view in (base.t(), base[:, 1:3], torch.ones(3, 1).expand(3, 4), base[::2]):
        got = sub.layout(view).tolist()
        assert got == list(view.stride()) + [int(view.is_contiguous())], view.stride()
    assert sub.double(base.t()).tolist() == (base.t() * 2).tolist()  # values as the test sees them
    row = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    sub.scale_sum(row.expand(2, 3), torch.tensor([[True, True, False], [True, False, False]])).backward()
    assert row.grad.tolist() == [6.0, 3.0, 0.0]  # through the expanded view to the test's leaf


def test_a_tensor_passed_twice_is_one_object_in_the_child(sub):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    assert sub.same(x, x.clone()).item() == 5.0  # equal values, two objects
    loss = sub.same(x, x)
    assert loss.item() == 6.0  # `x is y` in the child, as in the test's process
    loss.backward()
    assert x.grad.tolist() == [2.0, 4.0]  # d(x*x)/dx, both uses summed onto the one leaf
    with batch(sub) as b:
        got = b.same(x, y=x)  # positional then keyword: still one object
    assert got.value.item() == 6.0
    a = torch.ones(2)
    with pytest.raises(Feedback, match=r"`x` written at 2 of 2"):
        sub.second_only(a, a)  # written through its second name: reported under its first
    assert a.tolist() == [1.0, 1.0]


def test_a_batch_answers_like_direct_calls(sub):
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([True, False, True])
    y = torch.ones(2, requires_grad=True)
    z = torch.zeros(3)
    with batch(sub) as b:
        loss = b.scale_sum(x, m)
        twice = b.double(y)
        boom = b.raise_value_error(torch.ones(2))
        floaty = b.as_float(x)
        mutated = b.mutate(z)  # a read-only input written: its answer fails, z stays as sent
        total = b.pair(y)
    assert sub.calls == 6 and sub.round_trips == 1  # six calls sent, one wait for their answers
    assert loss.value.item() == 12.0 and sub.round_trips == 1
    loss.value.backward()  # the eager gradient of a batched scalar loss
    assert x.grad.tolist() == [3.0, 0.0, 3.0]
    twice.value.sum().backward()  # a vector output: backward still makes its round trip
    assert y.grad.tolist() == [2.0, 2.0] and sub.round_trips == 2
    with pytest.raises(ValueError, match="shapes"):
        boom.value
    with pytest.raises(Feedback, match="Python float"):
        floaty.get()
    with pytest.raises(Feedback, match="`x` written at 3 of 3"):
        mutated.value
    assert z.tolist() == [0.0, 0.0, 0.0]
    assert total.value[1].tolist() == [2.0, 2.0]


def test_a_batch_copies_its_arguments_when_queued(sub):
    x = torch.ones(2)
    with batch(sub) as b:
        first = b.double(x)
        x.mul_(5)
        second = b.double(x)
    assert first.value.tolist() == [2.0, 2.0] and second.value.tolist() == [10.0, 10.0]


def test_a_call_after_a_batch_reads_the_batch_first(sub):
    with batch(sub) as b:
        pending = b.double(torch.ones(1))
    assert sub.double(torch.full((1,), 3.0)).tolist() == [6.0]  # not the batch's reply
    assert pending.value.tolist() == [2.0]
    with batch(sub) as b:
        p = b.double(torch.ones(1))
        assert p.value.tolist() == [2.0]  # each call is sent when made: readable at once
        q = b.double(torch.full((1,), 2.0))
        assert sub.double(torch.ones(1)).tolist() == [2.0]  # a direct call reads q's answer first
        r = b.double(torch.full((1,), 3.0))
    assert q.value.tolist() == [4.0] and r.value.tolist() == [6.0]


def test_a_large_batch_cannot_deadlock_the_two_sides(sub):
    big = torch.ones(256, 1024, dtype=torch.float64)  # 2 MB per call, both ways: fills the sockets
    with batch(sub) as b:
        outs = [b.double(big) for _ in range(12)]
    values = [o.value for o in outs]
    assert all(isinstance(v, torch.Tensor) and bool((v == 2).all()) for v in values), [type(v) for v in values]


def test_a_batch_that_kills_the_process_stops_the_grading(sub):
    with batch(sub) as b:
        ok = b.double(torch.ones(1))
        gone = b.exits(torch.ones(1))
        after = b.double(torch.ones(1))
    assert ok.value.tolist() == [2.0]  # answered before the exit, as in a sequence of calls
    with pytest.raises(SubmissionFailure):
        gone.value
    with pytest.raises(SubmissionFailure):
        after.value  # no call after the end counts


def test_a_batched_loss_read_during_another_backward_keeps_its_graph(sub):
    y = torch.ones(2, requires_grad=True)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with batch(sub) as b:
        twice = b.double(y)
        loss = b.scale_sum(x, torch.tensor([True, True]))
    twice.value.sum().backward()  # reads the loss's answer while autograd runs, grad mode off
    loss = loss.value
    assert loss.requires_grad
    loss.backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with torch.no_grad():  # as in-process: a call made under no_grad has no graph
        assert not sub.scale_sum(x, torch.tensor([True, True])).requires_grad


def test_a_batch_answers_each_call_as_it_is_computed(sub):
    with batch(sub) as b:
        first = b.double(torch.ones(1))
        rest = [b.double(torch.full((1,), float(k))) for k in range(5)]
    assert first.value.tolist() == [2.0]
    assert sub._in_flight is not None  # the later answers are still to be read
    assert [p.value.item() for p in rest] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert sub._in_flight is None


def test_batch_runs_calls_one_by_one_in_process():
    import types

    mod = types.ModuleType("impl")
    exec(SOURCE, mod.__dict__)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with batch(mod) as b:
        loss = b.scale_sum(x, torch.tensor([True, True]))
        boom = b.raise_value_error(x)
    loss.value.backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(ValueError):
        boom.value


def test_exceptions_keep_their_builtin_type(sub):
    with pytest.raises(ValueError, match=r"raised ValueError: shapes \[2\] and \[3\] differ") as e:
        sub.raise_value_error(torch.ones(2))
    assert isinstance(e.value, RemoteException)
    # where in the learner's file: its last frame there, nothing of the judge's
    line = SOURCE.splitlines().index('    raise ValueError("shapes [2] and [3] differ")') + 1
    assert str(e.value).endswith(f"(submission.py, line {line}, in raise_value_error)"), str(e.value)


@pytest.mark.parametrize("fn,what", [("as_float", "Python float"), ("as_numpy", "numpy.ndarray"),
                                     ("as_subclass", "subclass")])
def test_anything_but_a_plain_tensor_is_rejected(sub, fn, what):
    with pytest.raises(Feedback, match=what):
        getattr(sub, fn)(torch.ones(2))


def test_tuples_and_mixed_results_cross(sub):
    x = torch.ones(2, requires_grad=True)
    total, twice = sub.pair(x)
    assert total.requires_grad and not twice.requires_grad and twice.tolist() == [2.0, 2.0]
    total.backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_exit_inside_a_call_stops_the_grading(sub):
    with pytest.raises(SubmissionFailure) as e:
        sub.exits(torch.ones(1))
    assert e.value.kind == "runtime_error"
    with pytest.raises(AttributeError):
        sub.not_declared  # noqa: B018 - only the exercise's functions exist


def test_a_test_cannot_swallow_the_end_of_the_submission(sub):
    with pytest.raises(SubmissionFailure):  # not turned into "expected ValueError" feedback
        expect_raises(ValueError, sub.exits, torch.ones(1), what="exits")
    with pytest.raises(SubmissionFailure):
        try:
            sub.exits(torch.ones(1))
        except Exception:  # noqa: BLE001 - what a toy's crash-to-feedback wrapper does
            pytest.fail("a SubmissionFailure was caught as an ordinary exception")


def test_a_batched_call_past_its_limit_stops_the_grading(sandbox):
    job = sandbox.open_job(Limits(call_seconds=0.5, total_seconds=10))
    source = "import time\ndef nap(x):\n    time.sleep(float(x))\n    return x * 1\n"
    assert job.request({"op": "load", "source": source, "functions": ["nap"]}, during="load").header["ok"]
    sub = SubmissionProxy(job, [Function("nap", "nap", "tensor")])
    try:
        with batch(sub) as b:
            quick = b.nap(torch.tensor(0.0))
            stuck = b.nap(torch.tensor(30.0))
            never = b.nap(torch.tensor(0.0))
        assert quick.value.item() == 0.0
        with pytest.raises(SubmissionFailure) as e:
            stuck.value
        assert e.value.kind == "time_limit"
        with pytest.raises(SubmissionFailure):
            never.value  # the grading stopped at the stuck call
    finally:
        job.close()


def test_exception_types_are_a_fixed_set_whatever_names_come_back():
    from judge.proxy import remote_exception

    made = {type(remote_exception(f"Fresh{i}", "m")) for i in range(1000)}
    assert len(made) == 1  # one class for every name that is not passed through
    e = remote_exception("Fresh7", "boom")
    assert isinstance(e, RuntimeError) and isinstance(e, RemoteException)
    assert e.remote_type == "Fresh7" and str(e) == "boom"
    v = remote_exception("ValueError", "bad")
    assert isinstance(v, ValueError) and v.remote_type == "ValueError"
    assert type(v) is type(remote_exception("ValueError", "again"))


def test_a_batch_keeps_nothing_of_the_calls_it_has_answered(sub):
    with batch(sub) as b:
        pending = [b.double(torch.full((4,), float(k))) for k in range(5)]
    assert pending[2].value.tolist() == [4.0] * 4
    assert b.calls[:3] == [None] * 3 and all(c is not None for c in b.calls[3:])
    assert [p.value[0].item() for p in pending] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert b.calls == [None] * 5


def test_backward_all_asks_for_every_vector_output_in_one_round_trip(sub):
    xs = [torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True) for _ in range(3)]
    with batch(sub) as b:
        queued = [b.double(x) for x in xs]
    ys = [q.value for q in queued]
    probes = [torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64) * (k + 1) for k in range(3)]
    before = sub.round_trips
    backward_all(list(zip(ys, probes)))
    assert sub.round_trips == before + 1  # one wait for three backward passes
    for x, p in zip(xs, probes):
        assert x.grad.tolist() == (2 * p).tolist()


def test_backward_all_leaves_what_it_cannot_ask_ahead_to_autograd(sub):
    # a slice of an output, and an output that also reaches the loss through another path (its
    # gradient is not the one asked ahead): still the gradients of one backward pass, those
    # two asked for when autograd needs them
    x, v, z = (torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True) for _ in range(3))
    with batch(sub) as b:
        y, u, w = b.double(x), b.double(v), b.double(z)
    y, u, w = y.value, u.value, w.value
    p = torch.tensor([1.0, -1.0], dtype=torch.float64)
    before = sub.round_trips
    backward_all([(y[:1], p[:1]), (u, p), (w, p), (w * 3, p)])
    assert x.grad.tolist() == [2.0, 0.0] and v.grad.tolist() == [2.0, -2.0] and z.grad.tolist() == [8.0, -8.0]
    assert sub.round_trips == before + 3  # u and w asked ahead together; w and y again, one each


def test_a_prefetched_backward_pass_is_used_only_for_the_gradients_it_was_asked_for(sub):
    xs = [torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True) for _ in range(2)]
    ys = [sub.double(x) for x in xs]
    prefetch_backward([(y, torch.ones(2, dtype=torch.float64)) for y in ys])
    before = sub.round_trips
    ys[0].backward(torch.tensor([5.0, 7.0], dtype=torch.float64))  # not what was asked ahead
    assert xs[0].grad.tolist() == [10.0, 14.0] and sub.round_trips == before + 1
    ys[1].backward(torch.ones(2, dtype=torch.float64))  # what was asked: no wait
    assert xs[1].grad.tolist() == [2.0, 2.0] and sub.round_trips == before + 1


def test_a_backward_pass_that_raises_ahead_raises_where_autograd_asks(sub):
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    z = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    bad, good = sub.bad_backward(x), sub.double(z)
    with pytest.raises(ValueError, match="no gradient today"):
        backward_all([(good, torch.ones(2, dtype=torch.float64)), (bad, torch.ones(2, dtype=torch.float64))])
    assert sub.double(z).tolist() == [2.0, 4.0]  # the job still answers
