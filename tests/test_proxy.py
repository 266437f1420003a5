"""The proxy: a sandboxed submission's functions behave like local ones for the tests — values,
autograd, in-place mutation and exceptions cross the boundary; nothing else does."""

from __future__ import annotations

import pytest
import torch

from judge.errors import RemoteException, SubmissionFailure
from judge.exercise import Function, Limits
from judge.proxy import SubmissionProxy
from judge.testing import Feedback

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
'''
NAMES = ["scale_sum", "double", "frozen", "detached", "own_leaf", "mutate", "raise_value_error",
         "as_float", "as_numpy", "as_subclass", "pair", "exits"]


@pytest.fixture
def sub(sandbox):
    job = sandbox.open_job(Limits(call_seconds=5, total_seconds=30))
    msg = job.request({"op": "load", "source": SOURCE, "functions": NAMES}, during="load")
    assert msg.header["ok"] and not msg.header["missing"]
    returns = {"pair": "any"}
    yield SubmissionProxy(job, [Function(n, n, returns.get(n, "tensor")) for n in NAMES])
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


def test_in_place_mutation_is_copied_back(sub):
    x = torch.zeros(3)
    sub.mutate(x)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_exceptions_keep_their_builtin_type(sub):
    with pytest.raises(ValueError, match=r"raised ValueError: shapes \[2\] and \[3\] differ") as e:
        sub.raise_value_error(torch.ones(2))
    assert isinstance(e.value, RemoteException)


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
