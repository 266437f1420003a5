"""The submission as tier tests see it: a module-like proxy whose functions run in the sandbox.

``proxy.f(*args, **kwargs)`` sends tensors and plain values to the child and returns what the
submission returned, as fresh plain tensors. Autograd crosses the boundary: inputs that require
grad become leaves in the child, and an output's ``backward()`` asks the child for the gradients
(``_Bridge``). The test's tensors are never written: an in-place change the child reports fails
the call (``judge.readonly``), unless the exercise declares that input written. Exceptions come
back as the same built-in type; anything that means the process could not run (time, memory,
exit) is a ``SubmissionFailure``, which tests cannot catch.
"""

from __future__ import annotations

import builtins
import time
from typing import Any

import torch

from judge.box import replies
from judge.errors import MalformedReply, RemoteException, SubmissionFailure
from judge.exercise import Function
from judge.box.job import Job
from judge import readonly
from judge.testing import Feedback, Pending, describe_type, set_backward_prefetch
from sandbox import wire

_PASS_THROUGH = ("ValueError", "TypeError", "RuntimeError", "IndexError", "KeyError",
                 "NotImplementedError", "ZeroDivisionError", "AttributeError", "AssertionError",
                 "ArithmeticError", "OverflowError", "LookupError", "NameError",
                 "UnboundLocalError", "RecursionError", "FloatingPointError")
# One class per built-in type passed through, and one for every other name: a fixed set, made
# once (a class per name the submission chose would grow without bound).
_REMOTE_TYPES: dict[str, type] = {
    name: type(f"Remote{name}", (getattr(builtins, name), RemoteException), {"remote_type": name})
    for name in _PASS_THROUGH}
_REMOTE_OTHER = type("RemoteError", (RuntimeError, RemoteException), {})


def remote_exception(type_name: str, message: str) -> Exception:
    """An exception that is an instance of the built-in type the submission raised (another
    type's name, e.g. a class of its own, is a RuntimeError); ``remote_type`` is the name."""
    cls = _REMOTE_TYPES.get(type_name)
    if cls is not None:
        return cls(message)
    e = _REMOTE_OTHER(message)
    e.remote_type = type_name
    return e


def _tensor_nodes(tree: Any) -> list[dict]:
    """The tensor nodes of an encoded tree, in the order the child flattens the value."""
    if type(tree) is dict:
        if "T" in tree and "dtype" in tree:
            return [tree]
        if "L" in tree or "U" in tree:
            return [n for v in tree.get("L", tree.get("U")) for n in _tensor_nodes(v)]
        if "D" in tree:
            return [n for _, v in tree["D"] for n in _tensor_nodes(v)]
    return []


def _rebuild(tree: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(tree, torch.Tensor):  # the usual result: one tensor
        return tensors[0]
    it = iter(tensors)

    def go(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return next(it)
        if isinstance(v, list):
            return [go(x) for x in v]
        if isinstance(v, tuple):
            return tuple(go(x) for x in v)
        if isinstance(v, dict):
            return {k: go(x) for k, x in v.items()}
        return v

    return go(tree)


class _State:
    def __init__(self, proxy: "SubmissionProxy", handle: int, fn: str, outputs: list[torch.Tensor],
                 diff_mask: list[bool], inputs: list[torch.Tensor], eager: list | None):
        self.proxy, self.handle, self.fn = proxy, handle, fn
        self.outputs, self.diff_mask, self.inputs = outputs, diff_mask, inputs
        self.eager = eager  # for a scalar output: the gradients for d(output) = 1, sent with the result
        # (output gradients sent, the child's answer: gradients or the exception to raise) of a
        # backward pass asked for ahead (``prefetch_backward``), until autograd asks for it
        self.prefetched: tuple[list[torch.Tensor], Any] | None = None

    def output_grads(self, grad_outputs) -> list[torch.Tensor]:
        """The gradients the child is sent for autograd's ``grad_outputs`` (one per output; None
        is zero): one per differentiable output."""
        return [g if g is not None else torch.zeros_like(o)
                for g, o, d in zip(grad_outputs, self.outputs, self.diff_mask) if d]


class _Bridge(torch.autograd.Function):
    """Connects a remote call's outputs to its inputs in the test's autograd graph."""

    @staticmethod
    def forward(ctx, state: _State, *inputs: torch.Tensor):
        ctx.state = state
        outs = [o.clone() for o in state.outputs]
        ctx.mark_non_differentiable(*[o for o, d in zip(outs, state.diff_mask) if not d])
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grad_outputs: torch.Tensor):
        state: _State = ctx.state
        grads = state.output_grads(grad_outputs)
        ahead, state.prefetched = state.prefetched, None
        if state.eager is not None and len(grads) == 1 and grads[0].numel() == 1:
            got = [None if e is None else e * grads[0].reshape(()) for e in state.eager]
        elif ahead is not None and _same(ahead[0], grads):  # asked for these very gradients ahead
            if isinstance(ahead[1], BaseException):
                raise ahead[1]
            got = ahead[1]
        else:
            got = state.proxy._backward(state, grads)
        return (None, *got)


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """The same output gradients, bit for bit (a prefetched answer is used only for those)."""
    return len(a) == len(b) and all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b))


def prefetch_backward(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Ask the sandbox now, in one round trip, for the backward passes that
    ``torch.autograd.backward([out...], [grad...])`` will need of submission outputs: each
    ``out`` that is itself a sandboxed call's output (not a view or a function of one), whose
    call kept its graph, gets its call's backward pass for ``grad`` (zeros for the call's other
    outputs). Autograd then finds each answer waiting (``_Bridge.backward`` uses it only for
    exactly the gradients it would send, else asks again), so k outputs cost one wait instead of
    k. Anything else in ``pairs`` is left to autograd as it is."""
    asked: dict[int, tuple[_State, list[torch.Tensor]] | None] = {}
    for out, grad in pairs:
        node = getattr(out, "grad_fn", None)
        state = getattr(node, "state", None)
        if not isinstance(state, _State) or not isinstance(grad, torch.Tensor) or state.eager is not None:
            continue
        if id(state) in asked:  # two outputs of one call: autograd sums them, asked for then
            asked[id(state)] = None
            continue
        outs = [torch.zeros_like(o) for o in state.outputs]
        if not (0 <= out.output_nr < len(outs)) or grad.shape != out.shape:
            continue
        outs[out.output_nr] = grad.detach().to(out.dtype)
        asked[id(state)] = (state, state.output_grads(outs))
    by_proxy: dict[int, list[tuple[_State, list[torch.Tensor]]]] = {}
    for entry in asked.values():
        if entry is not None:
            by_proxy.setdefault(id(entry[0].proxy), []).append(entry)
    for entries in by_proxy.values():
        if len(entries) > 1:  # one backward pass asks nothing ahead of autograd
            entries[0][0].proxy._prefetch(entries)


set_backward_prefetch(prefetch_backward)


class _Encoded:
    """One call, encoded for the wire; ``result`` turns its reply into what the test sees."""

    def __init__(self, proxy: "SubmissionProxy", fn: str, args: tuple, kwargs: dict, blobs: list):
        proxy.calls += 1
        self.proxy, self.fn = proxy, fn
        self.args, self.kwargs = args, kwargs  # to name an input the call wrote into
        self.host_in: list[torch.Tensor] = []  # the tensors that cross, in the child's order
        # with their strides: a transposed, expanded or sliced view reaches the child as one
        self.header = {"fn": fn, "args": wire.encode(list(args), blobs, tensors=self.host_in, strides=True),
                       "kwargs": wire.encode(dict(kwargs), blobs, tensors=self.host_in, strides=True)}
        self.flags = [t.requires_grad and t.is_floating_point() for t in self.host_in]
        self.header["grad"] = self.flags
        self.grad_mode = torch.is_grad_enabled()  # the test's, when it made the call

    def result(self, msg: wire.Message) -> Any:
        proxy, fn, h = self.proxy, self.fn, msg.header
        if not h.get("ok"):
            proxy._raise(fn, h.get("exc") or {})
        if "mutated" in h or "flipped" in h:
            proxy._check_inputs(self, msg)
        result_tree = h.get("result")
        outs: list[torch.Tensor] = []
        result = proxy._decode(msg, result_tree, outs)
        nodes = _tensor_nodes(result_tree)
        proxy._check_return(fn, result, nodes)
        if not outs:
            return result
        diff = [bool(n.get("rg")) and o.is_floating_point() for n, o in zip(nodes, outs)]
        handle = int(h.get("handle") or 0)
        diff_inputs = [t for t, f in zip(self.host_in, self.flags) if f]
        if handle and any(diff) and diff_inputs:
            state = _State(proxy, handle, fn, outs, diff, diff_inputs,
                           proxy._checked_grads(fn, msg, diff_inputs))
            with torch.set_grad_enabled(self.grad_mode):  # a batch may be read inside a backward()
                outs = list(_Bridge.apply(state, *diff_inputs))
        else:  # a detached result, or a leaf the submission made itself
            outs = [o.requires_grad_(True) if d else o for o, d in zip(outs, diff)]
        return _rebuild(result, outs)


class _Batch:
    """``with batch(sub) as b:``: each call goes to the sandbox as soon as it is made, without
    waiting for the answer; answers come back in order and are read when the test asks for one.

    The submission computes while the test prepares its next call and its expectations: one
    wait for many calls instead of a round trip each.
    """

    def __init__(self, proxy: "SubmissionProxy"):
        self.proxy = proxy
        # (call, its pending, sent at), in order; None once its answer is read: a settled call
        # is the test's (its Pending), the batch holds nothing of it
        self.calls: list[tuple[_Encoded, Pending, float] | None] = []
        self.received = 0  # answers read so far, in order
        self.last = 0.0  # when the last answer was read
        self.adding = False  # a call is being sent (answers read meanwhile are earlier calls')

    def __getattr__(self, name: str):
        if name not in self.__dict__.get("proxy")._functions:
            raise AttributeError(f"the exercise declares no function {name!r}")
        return lambda *args, **kwargs: self._add(name, args, kwargs)

    def _add(self, fn: str, args: tuple, kwargs: dict) -> Pending:
        proxy = self.proxy
        if proxy._in_flight is not self:  # another batch's answers come first
            proxy.settle()
            proxy._in_flight = self
            proxy.round_trips += 1
        blobs: list[bytes] = []
        call = _Encoded(proxy, fn, args, kwargs, blobs)
        pending = Pending(self)
        # Sent now, so the call sees its arguments as they are now. While the sandbox's input
        # is full (it is busy answering), read its answers so neither side waits on the other.
        self.adding = True
        try:
            proxy._job.send({"op": "call", **call.header}, blobs, during=f"a call to {fn}",
                            drain=self._read_one)
        finally:
            self.adding = False
        self.calls.append((call, pending, time.monotonic()))
        return pending

    def __enter__(self) -> "_Batch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        return None

    def _read_one(self) -> bool:
        """Read the next answer if one is owed for a call already sent; False if none is."""
        if self.received >= len(self.calls):
            return False
        self.collect(self.calls[self.received][1])
        return True

    def collect(self, upto: Pending | None = None) -> None:
        """Read the answers in order until ``upto`` has its own (all of them when None)."""
        while self.proxy._in_flight is self and self.received < len(self.calls) \
                and (upto is None or upto._batch is not None):
            call, pending, sent_at = self.calls[self.received]
            self.calls[self.received] = None
            self.received += 1
            try:
                msg = self.proxy._job.reply(during=f"a call to {call.fn}",
                                            since=max(sent_at, self.last), expect=replies.CALL)
                self.last = time.monotonic()
                pending._set(value=call.result(msg))
            except Exception as e:  # noqa: BLE001 - raised again where the test reads it
                pending._set(error=e)
            except BaseException as e:  # the grading stops (time, memory, exit): no later call counts
                pending._set(error=e)
                for entry in self.calls[self.received:]:
                    if entry is not None:
                        entry[1]._set(error=e)
                self.calls[self.received:] = [None] * (len(self.calls) - self.received)
                self.received = len(self.calls)
                self.proxy._job.kill()  # answers may still be on their way: nothing reads them now
                raise
        if self.received >= len(self.calls) and self.proxy._in_flight is self and not self.adding:
            self.proxy._in_flight = None


class SubmissionProxy:
    """Module-like access to the sandboxed submission's declared functions."""

    def __init__(self, job: Job, functions: list[Function]):
        self._job = job
        self._functions = {f.name: f for f in functions}
        self._in_flight: _Batch | None = None  # a batch sent, its reply not read yet
        self.calls = 0  # how many calls the tests made (for the timings report)
        self.violations = readonly.Recorder()  # inputs written or flipped, for the runner
        self._names: dict[str, list[str]] = {}  # each function's parameter names
        self.round_trips = 0  # how many requests they took (a batch is one)

    def __getattr__(self, name: str):
        functions = self.__dict__.get("_functions", {})
        if name not in functions:
            raise AttributeError(f"the exercise declares no function {name!r}")
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def __judge_batch__(self) -> "_Batch":
        """See ``judge.testing.batch``: each call sent when made, answers read when asked for."""
        return _Batch(self)

    def _call(self, fn: str, args: tuple, kwargs: dict) -> Any:
        self.settle()
        blobs: list[bytes] = []
        call = _Encoded(self, fn, args, kwargs, blobs)
        self.round_trips += 1
        msg = self._job.request({"op": "call", **call.header}, blobs, during=f"a call to {fn}",
                                expect=replies.CALL)
        return call.result(msg)

    def settle(self) -> None:
        """Read the reply of a batch still in flight (requests and replies go in turn)."""
        if self._in_flight is not None:
            self._in_flight.collect()

    def _decode(self, msg: wire.Message, tree: Any, tensors: list | None = None) -> Any:
        """A value of the child's answer; a malformed one ends the grading, as a bad frame does."""
        try:
            return msg.value(tree, tensors)
        except (wire.WireError, KeyError, TypeError, ValueError, OverflowError, RuntimeError) as e:
            self._job.kill()  # only the child's bytes are decoded here: whatever fails is theirs
            raise MalformedReply(f"the submission's process sent a malformed reply: "
                                 f"{str(e)[:300]}") from None

    def _raise(self, fn: str, exc: dict) -> None:
        kind, type_name = exc.get("kind"), str(exc.get("type", "Exception"))[:100]
        message = str(exc.get("message", ""))[:2000] + str(exc.get("where", ""))[:wire.WHERE_MAX]
        if kind == "memory_limit":
            raise SubmissionFailure("memory_limit", f"{fn} ran out of memory: {message}")
        if type_name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
            raise SubmissionFailure("runtime_error", f"{fn} raised {type_name}({message}): a "
                                    f"submission may not exit or interrupt the judge")
        if type_name == "NotImplementedError":
            raise remote_exception(type_name, f"{fn} is not implemented yet")
        raise remote_exception(type_name, f"{fn} raised {type_name}: {message}")

    def _check_return(self, fn: str, result: Any, nodes: list[dict]) -> None:
        if self._functions[fn].returns != "tensor":
            return
        if not isinstance(result, torch.Tensor):
            raise Feedback(f"{fn} must return a torch.Tensor, but it returned {describe_type(result)}")
        if nodes and nodes[0].get("sub"):
            raise Feedback(f"{fn} must return a plain torch.Tensor, but it returned the Tensor "
                           f"subclass {nodes[0]['sub']}")

    def _check_inputs(self, call: "_Encoded", msg: wire.Message) -> None:
        """The child changed inputs in place (values, layout) or flipped their requires_grad:
        the test's own tensors are untouched (they are what the test sent: its expectations
        come from them). A write into an input the exercise declares written (``writes``) is
        copied back; anything else fails the call, naming the input and the positions."""
        host_in, h = call.host_in, msg.header
        mutated = self._decode(msg, h["mutated"]) if h.get("mutated") else {}
        flipped = self._decode(msg, h["flipped"]) if h.get("flipped") else []
        if not isinstance(mutated, dict) or type(flipped) is not list:
            raise self._malformed("a malformed report of changed inputs")
        fn = self._functions[call.fn]
        names = readonly.labels(call.args, call.kwargs, self._params(fn))
        problems = []
        for key, new in mutated.items():
            i = int(key) if key.isdigit() else -1
            if not (0 <= i < len(host_in) and isinstance(new, torch.Tensor)):
                raise self._malformed("a malformed report of changed inputs")
            t, label = host_in[i], names[i] if i < len(names) else f"input {i + 1}"
            if readonly.top(label) in fn.writes and new.shape == t.shape and new.dtype == t.dtype:
                with torch.no_grad():
                    t.copy_(new)  # a declared output buffer: the test reads what was written
            else:
                problems.append((label, readonly.changes(t, new)))
        for i in flipped:
            if type(i) is not int or not 0 <= i < len(host_in):
                raise self._malformed("a malformed report of changed inputs")
            problems.append(readonly.flip(names[i] if i < len(names) else f"input {i + 1}",
                                          host_in[i].requires_grad and host_in[i].is_floating_point()))
        if problems:
            raise self.violations.report(readonly.violation(call.fn, problems))

    def _params(self, fn: Function) -> list[str]:
        names = self._names.get(fn.name)
        if names is None:
            names = self._names[fn.name] = readonly.param_names(fn.signature)
        return names

    def _malformed(self, what: str) -> SubmissionFailure:
        self._job.kill()
        return SubmissionFailure("runtime_error", f"the submission's process sent {what}")

    def __judge_violations__(self) -> list[str]:
        """The read-only violations seen since last asked (the runner fails the test with them)."""
        return self.violations.take()

    def _backward(self, state: _State, grads: list[torch.Tensor]) -> list[torch.Tensor | None]:
        self.settle()
        self.round_trips += 1
        blobs: list[bytes] = []
        header = {"op": "backward", "handle": state.handle, "grads": wire.encode(grads, blobs)}
        msg = self._job.request(header, blobs, during=f"the backward pass of {state.fn}",
                                expect=replies.BACKWARD)
        return self._backward_answer(state, msg)

    def _backward_answer(self, state: _State, msg: wire.Message) -> list[torch.Tensor | None]:
        """The gradients of a backward pass's reply, or what its submission raised."""
        if not msg.header.get("ok"):
            self._raise(f"{state.fn} (backward)", msg.header.get("exc") or {})
        got = self._checked_grads(state.fn, msg, state.inputs, key="grads")
        if got is None:
            raise Feedback(f"the backward pass of {state.fn} returned malformed gradients")
        return got

    def _prefetch(self, entries: list[tuple[_State, list[torch.Tensor]]]) -> None:
        """Send every backward pass of ``entries`` ((state, output gradients)) without waiting,
        then read the answers in order into each state's ``prefetched`` (see
        ``prefetch_backward``); an answer that is the submission's exception is kept to be
        raised where autograd asks for it. A failure that ends the grading (time, memory, exit,
        a malformed reply) is raised at once, as it would be for the first of them."""
        self.settle()
        self.round_trips += 1
        answered = [0]
        sent_at: list[float] = []

        def read_one() -> bool:  # the child's input is full: read an answer it owes
            i = answered[0]
            if i >= len(sent_at):
                return False
            state, grads = entries[i]
            msg = self._job.reply(during=f"the backward pass of {state.fn}", since=sent_at[i],
                                  expect=replies.BACKWARD)
            answered[0] += 1
            try:  # a SubmissionFailure (a BaseException) ends the grading here and now
                state.prefetched = (grads, self._backward_answer(state, msg))
            except Exception as e:  # noqa: BLE001 - raised where autograd asks for this pass
                state.prefetched = (grads, e)
            return True

        for state, grads in entries:
            blobs: list[bytes] = []
            header = {"op": "backward", "handle": state.handle, "grads": wire.encode(grads, blobs)}
            self._job.send(header, blobs, during=f"the backward pass of {state.fn}", drain=read_one)
            sent_at.append(time.monotonic())
        while read_one():
            pass

    def _checked_grads(self, fn: str, msg: wire.Message, inputs: list[torch.Tensor],
                       key: str = "eager") -> list[torch.Tensor | None] | None:
        """Gradients from the child, one per input (None: unused), or None if absent or malformed."""
        tree = msg.header.get(key)
        if tree is None:
            return None
        got = self._decode(msg, tree)
        if not isinstance(got, list) or len(got) != len(inputs):
            return None
        out: list[torch.Tensor | None] = []
        for g, x in zip(got, inputs):
            if g is not None and not (isinstance(g, torch.Tensor) and g.shape == x.shape):
                return None
            out.append(None if g is None else g.to(x.dtype))
        return out
