"""The sandboxed side of a job: load the submission, then answer calls from the judge.

Runs in a child forked from the zygote, after ``lockdown.isolate``. It only computes: the judge
sends a function name and arguments, the child sends back values, exceptions, the new contents of
inputs the submission mutated, and — on request — gradients. It holds each call's autograd graph
under a handle until the judge releases it.
"""

from __future__ import annotations

import linecache
import resource
import socket
import sys
import types
from typing import Any

import torch

from sandbox import wire

SUBMISSION_FILE = "submission.py"
SPIN_SECONDS = 0.0005  # how long to poll for the judge's next call before sleeping


class Session:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reader = wire.Reader(sock)
        self.module: types.ModuleType | None = None
        self.graphs: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.next_handle = 1
        self.spin = SPIN_SECONDS  # the judge says, at load, whether polling pays off right now

    # --- replies ---------------------------------------------------------------------------
    def reply(self, header: dict, values: dict[str, Any] | None = None) -> None:
        self.send(header, _encode_values(header, values or {}))

    def send(self, header: dict, blobs: list) -> None:
        """Flush what the submission printed, then answer, with this process's resource use so
        far (the judge reports the last one and need not wait for an exit report)."""
        _flush()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        header["ru"] = [round((ru.ru_utime + ru.ru_stime) * 1000, 1), ru.ru_maxrss]
        wire.send(self.sock, header, blobs)

    def reply_exception(self, e: BaseException) -> None:
        self.reply(_exception_item(e))

    # --- operations ------------------------------------------------------------------------
    def load(self, h: dict) -> None:
        source = h.get("source", "")
        spin = h.get("spin")
        if type(spin) in (int, float) and 0 <= spin <= 0.01:
            self.spin = float(spin)
        mod = types.ModuleType("submission")
        mod.__file__ = SUBMISSION_FILE
        try:
            code = compile(source, SUBMISSION_FILE, "exec", dont_inherit=True)
        except SyntaxError as e:
            line = e.lineno if type(e.lineno) is int and e.lineno >= 0 else None
            self.reply({"ok": False, "kind": "syntax_error",
                        "message": wire.syntax_message(e)[:wire.MESSAGE_MAX], "line": line})
            return
        except ValueError as e:  # e.g. NUL bytes in the source
            self.reply({"ok": False, "kind": "syntax_error", "message": _message(e)})
            return
        sys.modules["submission"] = mod
        global _SOURCE_LINES
        _SOURCE_LINES = source.splitlines() if type(source) is str else []
        # inspect.getsource finds the submission's code (there is no file): TorchScript's
        # @torch.jit.script compiles from it, and failed with "Can't get source" before
        linecache.cache[SUBMISSION_FILE] = (len(source), None, source.splitlines(True), SUBMISSION_FILE)
        try:
            exec(code, mod.__dict__)
        except BaseException as e:  # noqa: BLE001 - import-time code of any kind
            self.reply({"ok": False, "kind": "import_error",
                        "message": f"{_type_name(e)}: {_message(e)}{_where(e)}"})
            return
        self.module = mod
        missing = [n for n in h.get("functions", []) if not callable(getattr(mod, n, None))]
        self.reply({"ok": True, "missing": missing})

    def call(self, h: dict, msg: wire.Message) -> None:
        self.send(*self.run_call(h, msg))

    def run_call(self, h: dict, msg: wire.Message) -> tuple[dict, list]:
        """Run one call; its reply (header and tensor blobs) says ok, or the exception."""
        try:
            header, values = self._call(h, msg)
            return header, _encode_values(header, values)
        except wire.WireError as e:
            return {"ok": False, "exc": {"type": "TypeError", "message": f"the result cannot be "
                                         f"returned to the judge: {e}"[:wire.MESSAGE_MAX]}}, []
        except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt included
            return _exception_item(e), []

    def _call(self, h: dict, msg: wire.Message) -> tuple[dict, dict]:
        flat: list[torch.Tensor] = []  # the inputs' tensors, in the order the judge sent them
        args = msg.value(h.get("args", {"L": []}), flat)
        kwargs = msg.value(h.get("kwargs", {"D": []}), flat)
        fn = getattr(self.module, str(h.get("fn")), None)
        if not callable(fn) or not isinstance(args, list) or not isinstance(kwargs, dict):
            return {"ok": False, "exc": {"type": "AttributeError", "message": "no such function"}}, {}
        # Tensors marked requires_grad become leaves here; their gradients go back on request.
        for node_t, wants in zip(flat, _grad_flags(h)):
            if wants and node_t.is_floating_point():
                node_t.requires_grad_(True)
        watch = _Watch(flat, msg)
        out = fn(*args, **kwargs)  # its exceptions are the caller's (run_call) to report
        mutated = watch.mutated()
        outs = [t for t in wire.tensors_in(out) if t.requires_grad]
        handle = 0
        inputs = [t for t, m in zip(flat, watch.marks) if m[3]]  # as the judge sent them
        values = {"result": out, "mutated": mutated} if mutated else {"result": out}
        flipped = watch.flipped()
        if flipped:  # requires_grad set or cleared on an input: the judge reports it
            values["flipped"] = flipped
        if outs and inputs:
            handle = self.next_handle
            self.next_handle += 1
            if len(outs) == 1 and outs[0].numel() == 1:
                # A scalar loss: its gradient for d(loss) = 1 goes along now, which saves the
                # judge a round trip on backward() (backward is linear in d(loss)); the judge
                # never asks for this graph again, so it is freed now (a kept graph holds its
                # saved tensors, and every later call then allocates fresh memory).
                try:
                    values["eager"] = _grad(outs, inputs, [torch.ones_like(outs[0])], retain=False)
                    return {"ok": True, "handle": handle}, values
                except BaseException:  # noqa: BLE001 - the judge asks again, and sees the error
                    pass
            self.graphs[handle] = (outs, inputs)
        return {"ok": True, "handle": handle}, values

    def backward(self, h: dict, msg: wire.Message) -> None:
        outs, inputs = self.graphs.get(int(h.get("handle", 0)), ([], []))
        grads_out = msg.value(h.get("grads", {"L": []}))
        if not outs or not isinstance(grads_out, list) or len(grads_out) != len(outs):
            self.reply({"ok": False, "exc": {"type": "RuntimeError", "message": "unknown graph"}})
            return
        try:
            grads = _grad(outs, inputs, grads_out)
        except BaseException as e:  # noqa: BLE001
            self.reply_exception(e)
            return
        self.reply({"ok": True}, {"grads": list(grads)})

    def serve(self) -> None:
        while True:
            self.reader.poll(self.spin)
            header, payload = self.reader.recv()
            op = header.get("op")
            if op == "exit":  # report our own resource use, then go
                ru = resource.getrusage(resource.RUSAGE_SELF)
                self.reply({"ok": True, "cpu_ms": round((ru.ru_utime + ru.ru_stime) * 1000, 1),
                            "maxrss_kb": ru.ru_maxrss})
                return
            if op == "load":
                self.load(header)
            elif op == "release":
                for h in header.get("handles", []):
                    self.graphs.pop(h, None)
                self.reply({"ok": True})
            elif op in ("call", "backward"):
                if self.module is None:
                    self.reply({"ok": False, "exc": {"type": "RuntimeError", "message": "not loaded"}})
                    continue
                msg = wire.Message(header, payload, strides=True)  # the test's layouts
                (self.call if op == "call" else self.backward)(header, msg)
            else:
                self.reply({"ok": False, "exc": {"type": "RuntimeError", "message": f"bad op {op!r}"}})


class _Discard:
    def sendall(self, data: bytes) -> None:
        pass


def prewarm() -> None:
    """Make one call through the whole request path before the submission arrives.

    A child forked from the zygote shares its memory copy-on-write: the first call otherwise pays
    for copying every page it writes (reference counts, allocator state, autograd's buffers) and
    for caches built on first use. A spare child does this ahead, off the verdict's path.
    """
    def loss(x, y, m, clip=0.2):
        w = torch.where(m, (x - y).exp(), torch.zeros_like(x)).clamp(1 - clip, 1 + clip).detach()
        return -(w * x).sum() / m.sum().clamp(min=1)

    source = ('"""A submission."""\nfrom __future__ import annotations\nimport math\nimport torch\n'
              'import torch.nn.functional as F\n\n\ndef f(x: torch.Tensor, eps: float = 0.2) -> '
              'torch.Tensor:\n    """Doc."""\n    if x.dim() != 2:\n        raise ValueError(f"{x.shape}")\n'
              '    return torch.where(x > 0, x, -x).sum() * math.log(2) / max(1, x.shape[0])\n')
    module = types.ModuleType("prewarm")
    exec(compile(source, SUBMISSION_FILE, "exec", dont_inherit=True), module.__dict__)
    module.loss = loss
    session = Session(_Discard())  # type: ignore[arg-type]
    session.module = module
    x = torch.randn(4, 3, dtype=torch.float64)
    # a scalar loss in both float dtypes (its gradient goes along), a per-token result (its
    # graph kept for a backward), and a call that raises (the exception's reply)
    calls = [("loss", [x, x * 0.9, x > 0], [True, False, False]),
             ("loss", [x.float(), x.float() * 0.9, x > 0], [True, False, False]),
             ("f", [x], [True]), ("f", [x[0]], [True])]
    raises = module.f  # ValueError unless 2-D
    module.f = lambda t: t.exp() * 2 if t.dim() == 2 else raises(t)
    for fn, args, grad in calls:
        blobs: list = []
        header = {"fn": fn, "args": wire.encode(args, blobs),
                  "kwargs": wire.encode({"clip": 0.2} if fn == "loss" else {}, blobs), "grad": grad}
        header, payload = wire.unframe(wire.frame(header, blobs))
        wire.frame(*session.run_call(header, wire.Message(header, payload)))
    session.graphs.clear()


def _grad(outs: list[torch.Tensor], inputs: list[torch.Tensor], grads_out: list,
          retain: bool = True) -> list:
    """d(outs)/d(inputs) for the given output gradients (None for an unused input), keeping the
    graph for the next backward unless ``retain`` is False. ``torch.autograd.grad`` with
    ``allow_unused=True``, minus its Python argument handling (~10 µs of a ~60 µs call)."""
    if _ENGINE is None or not all(type(g) is torch.Tensor for g in grads_out):
        return list(torch.autograd.grad(outs, inputs, grads_out, allow_unused=True, retain_graph=retain))
    return list(_ENGINE.run_backward(tuple(outs), tuple(grads_out), retain, False, tuple(inputs),
                                     True, False))


_ENGINE = getattr(getattr(torch.autograd, "Variable", None), "_execution_engine", None)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a submission may have replaced or closed them
            pass


def _grad_flags(h: dict) -> list[bool]:
    flags = h.get("grad", [])
    return [bool(x) for x in flags] if isinstance(flags, list) else []


class _Watch:
    """Which inputs a call changed in place, at the cost of one copy and one compare.

    Every non-empty input is a view of the request's payload, so a snapshot of the payload shows
    any write through any alias; their (address, shape, strides) show a resize_, set_ or in-place
    transpose. Only when something changed are the inputs compared one by one (each over the
    span of memory its strides cover). Their requires_grad flags are kept too: a submission
    that sets or clears one (``requires_grad_``) is reported by ``flipped``.
    """

    def __init__(self, flat: list[torch.Tensor], msg: wire.Message):
        self.flat, self.msg = flat, msg
        self.before = bytes(msg.payload)
        self.marks = [(t.data_ptr(), t.shape, t.stride(), t.requires_grad) for t in flat]

    def mutated(self) -> dict[str, torch.Tensor]:
        if self.msg.payload == self.before and all(
                (t.data_ptr(), t.shape, t.stride()) == m[:3] for t, m in zip(self.flat, self.marks)):
            return {}
        base, payload = self.msg.base_address(), self.msg.payload
        out = {}
        for i, (t, m) in enumerate(zip(self.flat, self.marks)):
            a = m[0] - base
            n = wire.span(m[1], m[2]) * t.element_size()
            if (t.data_ptr(), t.shape, t.stride()) != m[:3] or \
                    (n and 0 <= a and payload[a:a + n] != self.before[a:a + n]):
                with torch._C.DisableTorchFunctionSubclass():
                    out[str(i)] = torch.Tensor.detach(t)
        return out

    def flipped(self) -> list[int]:
        """The inputs whose requires_grad the call changed, by position."""
        return [i for i, (t, m) in enumerate(zip(self.flat, self.marks)) if t.requires_grad != m[3]]


def _encode_values(header: dict, values: dict[str, Any]) -> list:
    """Encode ``values`` into ``header`` under their keys; returns the tensor blobs they need."""
    blobs: list = []
    for key, value in values.items():
        header[key] = wire.encode(value, blobs)
    return blobs


def _exception_item(e: BaseException) -> dict:
    kind = None
    message = _message(e)
    if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and "alloc" in message.lower()
                                      and "memory" in message.lower()):
        kind = "memory_limit"
    return {"ok": False, "exc": {"type": _type_name(e), "message": message,
                                 "where": _where(e), "kind": kind}}


def _type_name(e: BaseException) -> str:
    """The exception type's name as the judge accepts it: an identifier of at most
    ``wire.NAME_MAX`` characters (a class may be given any name; other characters become _)."""
    name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_"
                   for c in type(e).__name__[:wire.NAME_MAX])
    return name if name and not name[0].isdigit() else f"E{name}"[:wire.NAME_MAX]


def _message(e: BaseException) -> str:
    try:
        text = str(e)
        return text[:wire.MESSAGE_MAX] if type(text) is str else "<unprintable message>"
    except BaseException:  # noqa: BLE001
        return "<unprintable message>"


_SOURCE_LINES: list[str] = []  # the loaded submission's lines, for the frames _where shows
TRACE_HEADER = "\n  in your code, from the call to the line that raised:"  # judge.diagnose strips from here
FRAMES_SHOWN = 6  # frames of a deeper traceback shown: the first 2 and the last 4
CODE_CHARS = 100  # characters of each frame's line of code


def _where(e: BaseException) -> str:
    """The submission's own frames only: the learner sees where in their file it failed, its
    deepest frame in parentheses and, when the call went through more than one of their
    functions, each frame from the call site to the deepest with its line of code. (Walks the
    traceback itself: ``traceback.extract_tb`` would read every frame's source line from
    disk, ~30 us of a raising call.)"""
    try:
        frames = []
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == SUBMISSION_FILE:
                frames.append((tb.tb_lineno, tb.tb_frame.f_code.co_name))
            tb = tb.tb_next
        if not frames:
            return ""
        line, fn = frames[-1]
        text = f" (submission.py, line {line}, in {fn})"
        if len(frames) > 1:
            shown: list = frames
            if len(frames) > FRAMES_SHOWN:
                shown = frames[:2] + [len(frames) - FRAMES_SHOWN] + frames[-(FRAMES_SHOWN - 2):]
            text += TRACE_HEADER
            for f in shown:
                if isinstance(f, int):
                    text += f"\n    … {f} more calls (recursion?)"
                    continue
                code = _SOURCE_LINES[f[0] - 1].strip() if 0 < f[0] <= len(_SOURCE_LINES) else ""
                text += f"\n    line {f[0]}, in {f[1]}: {code[:CODE_CHARS]}"
        return text[:wire.WHERE_MAX]
    except BaseException:  # noqa: BLE001
        return ""
