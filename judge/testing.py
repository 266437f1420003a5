"""The toolkit that tier tests are written with.

Tier tests are plain functions named ``test_*`` in ``exercises/<slug>/tests/test_t<N>_*.py``.
They receive fixtures by parameter name (see ``FIXTURES``) and fail by raising ``Feedback``
(an ``AssertionError``) with a message that teaches: what was expected, what came back, and
the smallest input that shows it. The same functions run under the judge (``sub`` is a proxy
to the sandboxed submission) and under plain pytest (``sub`` is the reference, or ``--impl``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy
import torch

from sandbox import wire

# Fixture names a test function may ask for, and what each one is.
FIXTURES = {
    "sub": "the implementation under test: the sandboxed submission (a proxy) or, under pytest, --impl",
    "ref": "the exercise's vectorised reference solution (trusted, in-process)",
    "oracle": "the exercise's scalar-loop oracle (trusted, in-process)",
    "experiment": "the exercise's experiment.py module",
    "ctx": "the run's Context: seed, mode, a seeded generator, the artifact folder",
}


class Feedback(AssertionError):
    """A failed check, with a message meant for the learner."""


def visible(fn: Callable) -> Callable:
    """Mark a T0–T2 test as visible: it runs in ``run`` mode (the others only in ``submit``)."""
    fn.__judge_visible__ = True
    return fn


def is_visible(fn: Callable) -> bool:
    return bool(getattr(fn, "__judge_visible__", False))


@dataclass
class Context:
    """What a test knows about the run it belongs to."""

    seed: int  # the run's seed; fresh in submit mode, fixed in run mode, replayable with --seed
    mode: str = "submit"  # "run" (visible cases and the experiment) or "submit" (everything)
    out_dir: Path | None = None  # where T3 writes plots and metrics.json (None: write nothing)
    exercise: str = ""  # the exercise slug
    _memo: dict = field(default_factory=dict, repr=False)
    # (exercise, metrics, out_dir, limits) the judge writes as views after the verdict (runner.DeferredPlots)
    pending_plots: list = field(default_factory=list, repr=False)

    def once(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once in this run: e.g. the submission's T3 metrics, which every
        T3 test of the run reads (one run of the toy per grading, not one per test). When it
        raises, every later test asking for it gets the same exception (no second run)."""
        if key not in self._memo:
            try:
                self._memo[key] = (compute(), None)
            except Exception as e:  # noqa: BLE001 - raised again to each test that asks
                self._memo[key] = (None, e)
        value, error = self._memo[key]
        if error is not None:
            raise error
        return value

    def generator(self, salt: int = 0) -> torch.Generator:
        """A CPU generator seeded from the run's seed and ``salt`` (one per test keeps tests independent)."""
        g = torch.Generator()
        g.manual_seed((self.seed * 1_000_003 + salt) % (2**63 - 1))
        return g


# Reference results are deterministic: compute them once per process.
_MEMO: dict[Any, Any] = {}


def memo(key: Any, compute: Callable[[], Any]) -> Any:
    """Return ``compute()``, computed once per process for ``key`` (e.g. the reference's T3 metrics)."""
    if key not in _MEMO:
        _MEMO[key] = compute()
    return _MEMO[key]


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing against a float64 oracle: tight in float64, float32-sized in float32."""
    if dtype == torch.float64:
        return 1e-9, 1e-12
    return 2e-5, 1e-6


def describe(x: Any, limit: int = 12) -> str:
    """A compact, readable rendering of a value for feedback messages."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        head = f"tensor(shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')}"
        if t.numel() <= limit:
            vals = [_fmt(v) for v in t.reshape(-1).tolist()]
            if t.dim() == 0:
                return f"{head}, value={vals[0]})"
            return f"{head}, values={_nest(vals, tuple(t.shape))})"
        return head + ")"
    if isinstance(x, float):
        return _fmt(x)
    return repr(x)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.6g}"
    return str(v)


def _nest(vals: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) <= 1:
        return "[" + ", ".join(vals) + "]"
    step = len(vals) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


SHOWN_VALUES = 40  # a tensor of at most this many values is printed whole in a failure message
MAX_POSITIONS = 5  # differing positions named in an assert_close message


def describe_inputs(inputs: dict[str, Any] | None) -> str:
    """The failing input, every tensor's values when it is small enough to read."""
    if not inputs:
        return ""
    return "\n  with " + "\n       ".join(f"{k} = {describe(v, SHOWN_VALUES)}" for k, v in inputs.items())


def check_tensor(out: Any, *, what: str, shape: tuple[int, ...] | None = None,
                 dtype: torch.dtype | None = None) -> torch.Tensor:
    """Fail unless ``out`` is a plain torch.Tensor of the given shape and dtype; return it."""
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        raise Feedback(f"{what} must return a torch.Tensor, got {describe_type(out)}")
    if shape is not None and tuple(out.shape) != tuple(shape):
        hint = " (a scalar loss has shape (), not (1,))" if shape == () else ""
        raise Feedback(f"{what} returned shape {tuple(out.shape)}, expected {tuple(shape)}{hint}")
    if dtype is not None and out.dtype != dtype:
        raise Feedback(f"{what} returned dtype {out.dtype}, expected {dtype} (preserve the input dtype)")
    return out


def describe_type(x: Any) -> str:
    """What a value is, for feedback: its type (or the type that did not cross the boundary),
    with a hint for a Python float (``wire.type_name`` is the bare name)."""
    if isinstance(x, float):
        return "a Python float (did you call .item()?)"
    return getattr(x, "__judge_type__", None) or wire.type_name(x)


def assert_close(actual: Any, expected: torch.Tensor, *, what: str, rtol: float | None = None,
                 atol: float | None = None, inputs: dict[str, Any] | None = None,
                 equal_nan: bool = False, hint: str = "",
                 hint_when: Callable[[torch.Tensor, torch.Tensor], bool] | None = None) -> None:
    """Compare ``actual`` with ``expected`` elementwise and explain the first mismatch.

    ``hint`` is a piece of advice for one cause of a mismatch: it is added to the message only
    when ``hint_when(got, expected)`` (float64 tensors of equal shape) says the failure is that
    cause (e.g. ``nonfinite_where_finite`` for "use torch.where, never x * mask"): a hint that
    does not fit the failure misleads. Without ``hint_when`` it is always added."""
    exp = torch.as_tensor(expected)
    if not isinstance(actual, torch.Tensor):
        raise Feedback(f"{what}: expected a tensor, got {describe_type(actual)}{describe_inputs(inputs)}")
    if tuple(actual.shape) != tuple(exp.shape):
        raise Feedback(f"{what}: expected shape {tuple(exp.shape)}, got {tuple(actual.shape)}"
                       f"{describe_inputs(inputs)}")
    d_rtol, d_atol = tolerance(actual.dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    a = actual.detach().to(torch.float64)
    e = exp.detach().to(torch.float64)
    # One check when they agree (the usual case: a test makes hundreds of these). A NaN is
    # close to nothing, and to a NaN only with equal_nan; infinities only to themselves.
    if all_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    fits = bool(hint) and (hint_when is None or bool(hint_when(a, e)))
    raise Feedback(_mismatch(a, e, what=what + (f"; {hint}" if fits else ""), rtol=rtol, atol=atol,
                             equal_nan=equal_nan)
                   + f"\n  expected {describe(exp, SHOWN_VALUES)}\n  got      {describe(actual, SHOWN_VALUES)}"
                   + describe_inputs(inputs))


SMALL_CHECK = 32  # values up to which all_close compares Python floats (numpy beyond: faster from ~50)


def all_close(a: torch.Tensor, e: torch.Tensor, *, rtol: float, atol: float, equal_nan: bool = False) -> bool:
    """``torch.allclose(a, e, rtol, atol, equal_nan)`` for two float64 tensors of one shape, with
    its exact rule (``a == e``, or both NaN with ``equal_nan``, or ``|a - e|`` finite and at most
    ``atol + rtol * |e|``, each step one IEEE double operation as torch does it), in a fraction
    of its time on the small tensors tests compare: torch.allclose launches about ten kernels
    (~20 us on a busy 2-core machine), a few floats or numpy's ufuncs take 2-10 us."""
    if not (a.is_cpu and e.is_cpu) or a.dtype != torch.float64 or e.dtype != torch.float64:
        return torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if a.numel() <= SMALL_CHECK:
        for x, y in zip(a.reshape(-1).tolist(), e.reshape(-1).tolist()):
            if x == y or (equal_nan and x != x and y != y):
                continue
            d = abs(x - y)
            if not (d <= atol + abs(rtol * y) and d != math.inf):  # NaN fails both
                return False
        return True
    an, en = a.numpy(), e.numpy()
    with numpy.errstate(invalid="ignore", over="ignore"):  # inf - inf, as torch computes it
        d = numpy.abs(an - en)
        ok = (an == en) | (numpy.isfinite(d) & (d <= atol + numpy.abs(rtol * en)))
        if equal_nan:
            ok |= numpy.isnan(an) & numpy.isnan(en)
    return bool(ok.all())


def _mismatch(a: torch.Tensor, e: torch.Tensor, *, what: str, rtol: float, atol: float,
              equal_nan: bool) -> str:
    """Where ``a`` (got) and ``e`` (expected) differ: the first position where they really do
    (never "expected nan, got nan" when another position differs), a few more positions, and
    which positions hold NaN on which side."""
    bad = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    both_nan = bad & a_nan & e_nan
    real = bad & ~both_nan
    positions = [tuple(int(i) for i in p) for p in (real if bool(real.any()) else bad).nonzero()[:MAX_POSITIONS + 1].tolist()]
    idx = positions[0] if positions else ()
    n_bad = int(bad.sum())
    where = f" at index {idx}" if idx else ""
    if not bool(real.any()):  # never "expected nan, got nan"
        return (f"{what}{where}: got NaN, and the value it is compared with is NaN too (NaN on both "
                f"sides at {_positions(both_nan)}: {n_bad} of {bad.numel()} values); a NaN is never "
                f"close to anything, so a number was due there")
    text = (f"{what}{where}: expected {_fmt(float(e[idx]))}, got {_fmt(float(a[idx]))} "
            f"({n_bad} of {bad.numel()} values differ; rtol={rtol:g}, atol={atol:g})")
    if len(positions) > 1:
        more = "; ".join(f"{p}: expected {_fmt(float(e[p]))}, got {_fmt(float(a[p]))}"
                         for p in positions[1:MAX_POSITIONS])
        rest = int(real.sum() if bool(real.any()) else n_bad) - min(len(positions), MAX_POSITIONS)
        text += f"\n  also at {more}" + (f" and {rest} more" if rest > 0 else "")
    for label, mask in (("NaN on both sides", both_nan), ("NaN only in what you returned", a_nan & ~e_nan),
                        ("NaN only in the expected values", e_nan & ~a_nan & bad)):
        if bool(mask.any()):
            text += f"\n  {label} at {_positions(mask)}"
    return text


def nonfinite_where_finite(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """A ``hint_when`` for padding advice: the result is NaN or infinite where a finite value was
    due (what ``x * mask`` makes of NaN or inf padding: NaN * 0 is NaN)."""
    return bool((~torch.isfinite(got) & torch.isfinite(expected)).any())


def _positions(mask: torch.Tensor) -> str:
    pos = mask.nonzero()
    shown = ", ".join(str(tuple(int(i) for i in p)) for p in pos[:MAX_POSITIONS].tolist())
    n = int(pos.shape[0])
    return shown + (f" and {n - MAX_POSITIONS} more ({n} of {mask.numel()})" if n > MAX_POSITIONS else "")


def expect_raises(exc_type: type[BaseException], fn: Callable, *args: Any, what: str,
                  **kwargs: Any) -> None:
    """Fail unless ``fn(*args, **kwargs)`` raises ``exc_type`` (e.g. ValueError on bad shapes)."""
    try:
        fn(*args, **kwargs)
    except exc_type:
        return
    except Exception as e:  # noqa: BLE001 - the submission raised something else
        if isinstance(e, NotImplementedError):
            raise Feedback(f"{what}: {e}") from None
        raised = getattr(e, "remote_type", type(e).__name__)
        raise Feedback(f"{what}: expected {exc_type.__name__}, but it raised {raised}: {e}") from None
    raise Feedback(f"{what}: expected {exc_type.__name__}, but nothing was raised")


class Pending:
    """The outcome of a call made in a ``batch``: ``value`` is what the call returned, or raises
    what it raised (the same exception a direct call would have raised)."""

    __slots__ = ("_value", "_error", "_batch")

    def __init__(self, batch: Any = None):
        self._value: Any = None
        self._error: BaseException | None = None
        self._batch = batch  # set while the answer is still to be collected

    def _set(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error, self._batch = value, error, None

    @property
    def value(self) -> Any:
        if self._batch is not None:
            self._batch.collect(self)
            if self._batch is not None:  # a judge bug, never a submission's doing
                raise RuntimeError("the answer to this call was not read")
        if self._error is not None:
            raise self._error
        return self._value

    def get(self) -> Any:
        """``value``, as a callable (for ``expect_raises(ValueError, pending.get, ...)``)."""
        return self.value


def batch(sub: Any) -> Any:
    """Make many calls without a round trip each: the submission computes while the test works.

    ::

        with batch(sub) as b:
            outs = [b.masked_is_weights(x, y, m) for x, y, m in cases]
        for (x, y, m), out in zip(cases, outs):
            expected = oracle.masked_is_weights(x, y, m)  # computed while the submission runs
            assert_close(out.value, expected, what="...")

    Each call returns a ``Pending`` at once and goes to the sandbox straight away; answers come
    back in order. ``.value`` waits for the call's answer and is what the call returned
    (gradients, read-only inputs and return checks as for a direct call: ``judge.readonly``), or
    raises what it raised. A call sees its arguments as they were when it was made; no call's
    in-place writes reach the test's tensors (only an input the exercise declares written is
    updated, when that call's value is read). Under plain pytest (``sub`` is a module) the calls
    simply run one by one.
    """
    make = getattr(sub, "__judge_batch__", None)
    return make() if make is not None else _LocalBatch(sub)


class _LocalBatch:
    """``batch`` over an in-process implementation: each call runs when it is made."""

    def __init__(self, impl: Any):
        self._impl = impl

    def __getattr__(self, name: str):
        fn = getattr(self._impl, name)

        def call(*args: Any, **kwargs: Any) -> Pending:
            out = Pending()
            try:
                out._set(value=fn(*args, **kwargs))
            except Exception as e:  # noqa: BLE001 - raised again where the test reads it
                out._set(error=e)
            return out

        return call

    def __enter__(self) -> "_LocalBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def check_count_loss(got: Any, want: torch.Tensor, *, fn: str, setting: str, mask_dtype: torch.dtype,
                     counts: list[int]) -> None:
    """A loss on float64 log-probs with a ``mask_dtype`` 0/1 mask of ``counts`` valid tokens per
    response (``judge.cases.count_case``): a float64 scalar equal to ``want``, the reference's; a
    16-bit float mask cannot hold such counts, which a count taken in the mask's dtype misses."""
    what = (f"{fn}({setting}) with a {mask_dtype} 0/1 mask (float64 log-probs; {counts} valid tokens per "
            f"response, {sum(counts)} in all"
            + (f": counts {mask_dtype} cannot hold; count the tokens as integers or in logp's dtype)"
               if mask_dtype.is_floating_point else ")"))
    loss = check_tensor(got, what=what, shape=(), dtype=torch.float64)
    assert_close(loss, want, what=what, inputs={"mask dtype": str(mask_dtype), "valid tokens per response": counts})


# ``judge.proxy.prefetch_backward``, set when the proxy is imported (it imports this module, so
# this module does not import it): one round trip for the backward passes of many calls
_prefetch_backward: Callable[[list], None] | None = None


def set_backward_prefetch(fn: Callable[[list], None]) -> None:
    global _prefetch_backward
    _prefetch_backward = fn


def backward_all(pairs: Any) -> None:
    """``out.backward(grad)`` for every ``(out, grad)`` pair, as one backward pass: the leaves'
    gradients accumulate as those calls one after the other would leave them (a graph two of
    them share is walked once). Through the sandbox the submission's backward passes for every
    ``out`` that a call returned as it is (not a slice or a function of it) go out together, one
    round trip instead of one per output (``judge.proxy.prefetch_backward``); a scalar loss's
    gradient already came with its value. In-process it is ``torch.autograd.backward``.

    ::

        ys = [pending.value for pending in queued]        # each [N, D] on the graph
        backward_all([(y, probe) for y in ys])            # one wait for every VJP
    """
    pairs = [(out, grad) for out, grad in pairs]
    if not pairs:
        return
    if _prefetch_backward is not None:  # outputs of sandboxed calls exist only once it is set
        _prefetch_backward(pairs)
    torch.autograd.backward([out for out, _ in pairs], [grad for _, grad in pairs])


def backward_sums(outs: Any) -> None:
    """``c.sum().backward()`` for every ``c`` of ``outs``, as one backward pass (``backward_all``
    with all-ones gradients: one round trip for many vector outputs). An output that is not a
    tensor on the graph is skipped: the leaves it should have reached keep ``grad`` None, for the
    test to report (as feedback, where ``c.sum().backward()`` would raise)."""
    backward_all([(c, torch.ones_like(c)) for c in outs
                  if isinstance(c, torch.Tensor) and c.requires_grad])


def backward_losses(losses: Any, whats: Any, *, reaches: str = "logp") -> None:
    """``backward()`` of many independent losses (each from its own call on its own leaves) in
    one pass of autograd's engine instead of one per loss: each leaf still gets exactly its own
    loss's gradient (the losses share no graph, and each is seeded with 1). A loss that is not a
    tensor in the graph fails with the name of its case (``whats``), as its own backward() would."""
    losses = list(losses)
    for loss, what in zip(losses, whats):
        if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
            raise Feedback(f"{what}: the loss must be a tensor with requires_grad=True, so that "
                           f"backward() reaches {reaches} (no .detach(), no torch.no_grad, no .item())")
    if losses:
        torch.autograd.backward(losses)


def assert_exactly_zero(t: torch.Tensor, *, what: str) -> None:
    """Fail unless every value of ``t`` is exactly 0 (a NaN is not), e.g. a gradient at padding."""
    if not bool((t == 0).all()):
        raise Feedback(f"{what} must be exactly 0, got {describe(t)}")


def assert_no_grad(t: torch.Tensor, *, what: str) -> None:
    """Fail unless the frozen input ``t`` received no gradient (None or all zeros)."""
    g = t.grad
    if g is not None and bool((g != 0).any()):
        raise Feedback(f"{what} must be detached (stop-gradient), but it received gradient {describe(g)}")


def without_defaults(kwargs: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` less the entries equal to their default in ``defaults`` (the spec's, written out
    by the test): a sweep that calls with these passes each parameter alone when the others are
    at their defaults, so a solution that honours one only beside another is seen."""
    return {k: v for k, v in kwargs.items() if k not in defaults or v != defaults[k]}


def leaf(x: torch.Tensor, requires_grad: bool = True) -> torch.Tensor:
    """A fresh leaf copy of ``x`` that records gradients."""
    return x.detach().clone().requires_grad_(requires_grad)


def sibling(test_file: str, name: str):
    """Load a helper module that lives beside a test file (e.g. ``tests/_cases.py``) by path.

    Tier test files are loaded by path, not as a package, so shared case generators of one
    exercise are imported with ``cases = sibling(__file__, "_cases")``.
    """
    from judge.exercise import load_module

    path = Path(test_file).resolve().parent / f"{name}.py"
    return load_module(path, f"_judge_tests_{path.parent.parent.name}_{name}")


def check_connected_zero(value: Any, *, what: str, dtype: torch.dtype, leaves: dict[str, torch.Tensor],
                         why: str) -> None:
    """A loss that must be exactly 0 yet stay in the graph (e.g. an all-empty mask over padding
    that holds NaN): a 0-d ``dtype`` tensor, exactly 0, ``requires_grad``, and after
    ``backward()`` every leaf in ``leaves`` (name -> tensor) has an all-zero gradient. ``why`` says
    what a nonzero value usually means."""
    loss = check_tensor(value, what=what, shape=(), dtype=dtype)
    if float(loss.detach()) != 0.0:
        raise Feedback(f"{what}: must be exactly 0 ({why}), got {describe(loss)}")
    if not loss.requires_grad:
        raise Feedback(f"{what}: must stay connected to the graph (requires_grad=True)")
    loss.backward()
    for name, t in leaves.items():
        if t.grad is None or not bool((t.grad == 0).all()):
            raise Feedback(f"{what}: {name}.grad must be all zeros, got {describe(t.grad)}")

