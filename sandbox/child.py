"""The sandboxed side of a job: load the submission, then answer calls from the judge.

Runs in a child forked from the zygote, after ``lockdown.isolate``. It only computes: the judge
sends a function name and arguments, the child sends back values, exceptions, the new contents of
inputs the submission mutated, and — on request — gradients. It holds each call's autograd graph
under a handle until the judge releases it.
"""

from __future__ import annotations

import resource
import socket
import sys
import traceback
import types
from typing import Any

import torch

from sandbox import wire

SUBMISSION_FILE = "submission.py"
SPIN_SECONDS = 0.0005  # how long to poll for the judge's next call before sleeping


class Session:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.module: types.ModuleType | None = None
        self.graphs: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.next_handle = 1
        self.spin = SPIN_SECONDS  # the judge says, at load, whether polling pays off right now

    # --- replies ---------------------------------------------------------------------------
    def reply(self, header: dict, values: dict[str, Any] | None = None) -> None:
        _flush()
        blobs: list[bytes] = []
        for key, value in (values or {}).items():
            header[key] = wire.encode(value, blobs)
        wire.send(self.sock, header, blobs)

    def reply_exception(self, e: BaseException) -> None:
        kind = None
        if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and "alloc" in str(e).lower()
                                          and "memory" in str(e).lower()):
            kind = "memory_limit"
        self.reply({"ok": False, "exc": {"type": type(e).__name__, "message": _message(e),
                                         "where": _where(e), "kind": kind}})

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
            self.reply({"ok": False, "kind": "syntax_error",
                        "message": f"line {e.lineno}: {e.msg}", "line": e.lineno})
            return
        except ValueError as e:  # e.g. NUL bytes in the source
            self.reply({"ok": False, "kind": "syntax_error", "message": str(e)})
            return
        sys.modules["submission"] = mod
        try:
            exec(code, mod.__dict__)
        except BaseException as e:  # noqa: BLE001 - import-time code of any kind
            self.reply({"ok": False, "kind": "import_error",
                        "message": f"{type(e).__name__}: {_message(e)}{_where(e)}"})
            return
        self.module = mod
        missing = [n for n in h.get("functions", []) if not callable(getattr(mod, n, None))]
        self.reply({"ok": True, "missing": missing})

    def call(self, h: dict, msg: wire.Message) -> None:
        args = msg.value(h.get("args", {"L": []}))
        kwargs = msg.value(h.get("kwargs", {"D": []}))
        fn = getattr(self.module, str(h.get("fn")), None)
        if not callable(fn) or not isinstance(args, list) or not isinstance(kwargs, dict):
            self.reply({"ok": False, "exc": {"type": "AttributeError", "message": "no such function"}})
            return
        # Tensors marked requires_grad become leaves here; their gradients go back on request.
        flat = wire.tensors_in(args) + wire.tensors_in(kwargs)
        for node_t, wants in zip(flat, _grad_flags(h)):
            if wants and node_t.is_floating_point():
                node_t.requires_grad_(True)
        before = [t.detach().clone() for t in flat]
        try:
            out = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt included
            self.reply_exception(e)
            return
        mutated = {str(i): t.detach() for i, (t, b) in enumerate(zip(flat, before))
                   if not _same(t, b)}
        outs = [t for t in wire.tensors_in(out) if t.requires_grad]
        handle = 0
        inputs = [t for t in flat if t.requires_grad]
        values = {"result": out, "mutated": mutated}
        if outs and inputs:
            handle = self.next_handle
            self.next_handle += 1
            self.graphs[handle] = (outs, inputs)
            if len(outs) == 1 and outs[0].numel() == 1:
                # A scalar loss: its gradient for d(loss) = 1 goes along now, which saves the
                # judge a round trip on backward() (backward is linear in d(loss)).
                try:
                    values["eager"] = list(torch.autograd.grad(
                        outs, inputs, [torch.ones_like(outs[0])], allow_unused=True, retain_graph=True))
                except BaseException:  # noqa: BLE001 - the judge asks again, and sees the error
                    pass
        try:
            self.reply({"ok": True, "handle": handle}, values)
        except wire.WireError as e:
            self.reply({"ok": False, "exc": {"type": "TypeError", "message": f"the result cannot be "
                        f"returned to the judge: {e}"}})

    def backward(self, h: dict, msg: wire.Message) -> None:
        outs, inputs = self.graphs.get(int(h.get("handle", 0)), ([], []))
        grads_out = msg.value(h.get("grads", {"L": []}))
        if not outs or not isinstance(grads_out, list) or len(grads_out) != len(outs):
            self.reply({"ok": False, "exc": {"type": "RuntimeError", "message": "unknown graph"}})
            return
        try:
            grads = torch.autograd.grad(outs, inputs, grads_out, allow_unused=True, retain_graph=True)
        except BaseException as e:  # noqa: BLE001
            self.reply_exception(e)
            return
        self.reply({"ok": True}, {"grads": list(grads)})

    def serve(self) -> None:
        while True:
            wire.spin_until_readable(self.sock, self.spin)
            header, payload = wire.recv(self.sock)
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
                msg = wire.Message(header, payload)
                (self.call if op == "call" else self.backward)(header, msg)
            else:
                self.reply({"ok": False, "exc": {"type": "RuntimeError", "message": f"bad op {op!r}"}})


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a submission may have replaced or closed them
            pass


def _grad_flags(h: dict) -> list[bool]:
    flags = h.get("grad", [])
    return [bool(x) for x in flags] if isinstance(flags, list) else []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunctionSubclass():
        a = torch.Tensor.detach(a)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))) \
            if a.numel() else True


def _message(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except BaseException:  # noqa: BLE001
        return "<unprintable message>"


def _where(e: BaseException) -> str:
    """The submission's own frames only: the learner sees where in their file it failed."""
    try:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == SUBMISSION_FILE]
    except BaseException:  # noqa: BLE001
        return ""
    if not frames:
        return ""
    f = frames[-1]
    return f" (submission.py, line {f.lineno}, in {f.name})"
