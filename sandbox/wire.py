"""The safe encoding of messages between the judge and a sandboxed submission.

A frame is ``!II`` (header length, payload length), a JSON header, then the raw bytes of every
tensor in the header, concatenated, each padded to 8 bytes. Values form a small JSON tree; a
tensor is a node ``{"T": i, "dtype", "shape"}`` (dtype from a fixed list), and the header's
``nb`` lists each tensor's byte count in payload order, against which a node is checked when it
is decoded. Other nodes: ``{"f": x}`` a float (``"nan"``, ``"inf"``, ``"-inf"`` as strings),
``{"I": digits}`` an int beyond 64 bits, ``{"L"|"U": [...]}`` a list or tuple, ``{"D": [[key,
value], ...]}`` a dict with str keys, ``{"O": type, "r": repr}`` anything else, by name. Nothing
is ever unpickled and no code object crosses: a malicious peer can only send wrong numbers, bad
JSON or oversized frames, and each of those is a ``WireError``. Decoding is strict: each node has
exactly the keys of its kind, each tensor of the table is claimed by one node at most, a shape is
bounded even when empty, and a ``Reader`` refuses a frame over its caps from its length prefix
(``FrameTooLarge``, nothing of it read). What a reply's header may hold besides values is the
judge's to check (``judge.box.replies``). Headers are written and read with orjson where it is
installed, with the standard library's json for what it refuses.
"""

from __future__ import annotations

import json
import math
import os
import select
import socket
import struct
import time
from typing import Any, Callable

import numpy
import torch

try:  # 5-10x faster on these small headers; the standard library's json is the fallback
    import orjson
except ImportError:  # pragma: no cover - a dependency, but the codec works without it
    orjson = None

_FRAME = struct.Struct("!II")
MAX_HEADER = 4 << 20  # bytes of JSON in one frame
MAX_PAYLOAD = 256 << 20  # bytes of tensor data in one frame
MAX_DEPTH = 16  # nesting of lists/tuples/dicts
MAX_NODES = 10_000  # values in one tree
# What a child's reply may carry of an exception (judge.box.replies checks, sandbox.child caps):
NAME_MAX = 100  # characters of an exception type's name (an identifier)
MESSAGE_MAX = 2000  # characters of its message
WHERE_MAX = 1500  # characters of where it was raised: " (submission.py, line N, in f)" and the
# learner's own frames, call site first, each with its line of code (sandbox.child._where)


def syntax_message(e: SyntaxError) -> str:
    """A syntax error as both sides report it (the child, and the judge loading in-process):
    "line 41: expected ':'", the line itself and a caret under where Python stopped reading."""
    text = f"line {e.lineno}: {e.msg}"
    code = e.text if type(e.text) is str else ""
    code = code.rstrip("\r\n")
    if code.strip():
        indent = len(code) - len(code.lstrip())
        shown = code.strip()[:200]
        text += f"\n    {shown}"
        if type(e.offset) is int and 0 < e.offset - indent <= len(shown) + 1:
            text += "\n    " + " " * (e.offset - indent - 1) + "^"
    return text


DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
# numpy's view of the same bytes (bfloat16 has none): a tensor is made from the payload at
# ~0.6 us through numpy, where torch.frombuffer and a view to the shape take ~1.4
_NUMPY = {name: numpy.dtype(name) for name in DTYPES if name != "bfloat16"}


# One encoder for every frame (json.dumps with options builds a new one per call).
_JSON = json.JSONEncoder(separators=(",", ":"))


def _dumps(header: dict) -> bytes:
    """A header's JSON. orjson takes ~0.4 us where json takes ~4.5 for a call's header; what it
    refuses (a string with a lone surrogate, an int beyond 64 bits) goes through json, as
    before, and so does the reading side (``_loads``)."""
    if orjson is not None:
        try:
            return orjson.dumps(header)
        except orjson.JSONEncodeError:
            pass
    return _JSON.encode(header).encode()


def _loads(head: bytes) -> Any:
    """JSON read by orjson; what it refuses and json takes (lone surrogates, ints beyond 64 bits)
    by json. Raises json's errors (``_header`` turns them into a ``WireError``)."""
    if orjson is not None:
        try:
            return orjson.loads(head)
        except orjson.JSONDecodeError:
            pass
    return json.loads(head)


class WireError(Exception):
    """A malformed, oversized or truncated message."""


class FrameTooLarge(WireError):
    """A frame whose length prefix announces more than the reader accepts (nothing of it is
    read)."""


# --- framing -------------------------------------------------------------------------------

def frame(header: dict, blobs: list[bytes] = ()) -> bytes:
    """One frame. With tensor blobs (``encode``'s: each tensor's bytes, then its padding), the
    header also lists each tensor's byte count (``nb``), so the receiver finds every tensor's
    bytes without walking the value tree."""
    if blobs:
        header["nb"] = [len(b) for b in blobs[0::2]]
    head = _dumps(header)
    size = sum(map(len, blobs))
    return b"".join([_FRAME.pack(len(head), size), head, *blobs])


def send(sock: socket.socket, header: dict, blobs: list[bytes] = ()) -> None:
    sock.sendall(frame(header, blobs))  # one syscall, one wake-up


def send_until(sock: socket.socket, data: bytes, deadline: float,
               on_full: Callable[[], bool] | None = None) -> None:
    """Send all of ``data`` on a non-blocking socket by ``deadline`` (``time.monotonic``); a
    small frame goes in one syscall, and only a full peer makes us wait (``TimeoutError``).
    ``on_full``: called when the peer's input is full, before waiting; True means it made room
    (e.g. read an answer the peer was blocked writing), so sending is tried again at once."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
        except BlockingIOError:
            if on_full is not None and on_full():
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [sock], [], remaining)[1]:
                raise TimeoutError("the peer did not read in time") from None


class Reader:
    """The frames arriving on one socket, in as few system calls as possible: one ``recv``
    takes whatever has arrived (a small frame whole, or several), and what follows the frame
    asked for is kept for the next one. Works on blocking and non-blocking sockets; all reads
    of the socket must go through it."""

    CHUNK = 1 << 16  # bytes asked for per recv
    DIRECT = 1 << 18  # a larger payload is read straight into its own buffer

    def __init__(self, sock: socket.socket, max_payload: int = MAX_PAYLOAD,
                 max_header: int = MAX_HEADER):
        self.sock, self.max_payload, self.max_header = sock, max_payload, max_header
        self.received = 0  # bytes of the frames returned so far (prefix, header and payload)
        self._buf = bytearray()  # received, not yet returned
        self._chunk = memoryview(bytearray(self.CHUNK))
        self._eof = False

    def poll(self, seconds: float) -> bool:
        """True when bytes are here or arrive within ``seconds``, polling without sleeping:
        back-to-back calls then skip two scheduler wake-ups (tens of microseconds on small
        VMs), and the poll that finds them has already read them."""
        if self._buf or self._eof:
            return True
        end = time.perf_counter() + seconds
        while True:
            try:
                self._fill(socket.MSG_DONTWAIT)
                return True
            except BlockingIOError:
                pass
            except OSError:  # reset or closed: the next recv says so
                return True
            if time.perf_counter() >= end:
                return False
            os.sched_yield()  # when the cores are busy, whoever we wait for gets ours

    def _fill(self, flags: int = 0) -> None:
        n = self.sock.recv_into(self._chunk, self.CHUNK, flags)
        if n == 0:
            self._eof = True
        else:
            self._buf += self._chunk[:n]

    def _wait(self, deadline: float | None) -> None:
        """Read more; on a non-blocking socket, wait for it within ``deadline``."""
        if self._eof:
            raise EOFError("peer closed the connection")
        try:
            self._fill()
        except BlockingIOError:
            self._until_readable(deadline)
        if self._eof:
            raise EOFError("peer closed the connection")

    def _until_readable(self, deadline: float | None) -> None:
        """A non-blocking socket has nothing yet: wait for more until ``deadline``."""
        remaining = -1.0 if deadline is None else deadline - time.monotonic()
        if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
            raise TimeoutError("the rest of the frame did not come in time") from None

    def recv(self, deadline: float | None = None) -> tuple[dict, bytearray]:
        """The next frame. On a non-blocking socket, ``deadline`` (``time.monotonic``) bounds
        the wait for what has not arrived yet; a blocking socket just blocks."""
        buf = self._buf
        while len(buf) < _FRAME.size:
            self._wait(deadline)
        head_len, size = _FRAME.unpack_from(buf)
        if head_len > self.max_header or size > self.max_payload:
            raise FrameTooLarge(f"frame too large: {head_len} header bytes and {size} payload "
                                f"bytes (at most {self.max_header} and {self.max_payload})")
        self.received += _FRAME.size + head_len + size
        start = _FRAME.size + head_len
        while len(buf) < start:
            self._wait(deadline)
        head = bytes(buf[_FRAME.size:start])
        if size <= self.DIRECT:
            while len(buf) < start + size:
                self._wait(deadline)
            payload = buf[start:start + size]  # a copy: tensors view it
            del buf[:start + size]
        else:  # read straight into the payload's own buffer, and not past it
            payload = bytearray(size)
            got = min(len(buf) - start, size)
            payload[:got] = buf[start:start + got]
            del buf[:start + got]
            view = memoryview(payload)
            while got < size:
                try:
                    k = self.sock.recv_into(view[got:], size - got)
                except BlockingIOError:
                    self._until_readable(deadline)
                    continue
                if k == 0:
                    self._eof = True
                    raise EOFError("peer closed the connection")
                got += k
        return _header(head), payload


def _header(head: bytes) -> dict:
    try:
        header = _loads(head)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise WireError(f"bad header: {e}") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    return header


def unframe(data: bytes) -> tuple[dict, bytearray]:
    """The header and payload of one whole frame held in memory (what ``frame`` made)."""
    head_len, size = _FRAME.unpack_from(data)
    start = _FRAME.size + head_len
    if len(data) != start + size:
        raise WireError("truncated or overlong frame")
    return _header(data[_FRAME.size:start]), bytearray(data[start:])



# --- values ----------------------------------------------------------------------------------

def type_name(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def encode(value: Any, blobs: list[bytes], *, tensors: list[torch.Tensor] | None = None,
           strides: bool = False) -> Any:
    """Encode a value tree; each tensor appends its bytes and their padding to ``blobs`` (and
    itself to ``tensors`` when given: the tensors that cross, in the order the peer decodes them).
    ``strides``: a non-contiguous tensor (transposed, expanded, sliced) crosses with its strides
    and the span of memory they cover, so the peer gets the same layout (the judge's calls);
    otherwise as contiguous values (the child's answers)."""
    return _encode(value, blobs, 0, tensors, strides)


def _encode(value: Any, blobs: list, depth: int, tensors: list | None, strides: bool = False) -> Any:
    t = type(value)
    if t is torch.Tensor:  # the usual node first: a plain tensor
        if tensors is not None:
            if strides:  # the judge's calls: a tensor passed twice arrives as one object, twice
                for i, seen in enumerate(tensors):
                    if seen is value:
                        return {"A": i}
            tensors.append(value)
        return _encode_tensor(value, blobs, strides)
    if value is None or t is bool or t is str:  # exactly these: no subclasses
        return value
    if t is float:
        return {"f": value if math.isfinite(value) else repr(value)}
    if t is int:  # beyond 64 bits as digits: orjson reads such a literal as a float
        return value if -_I64 <= value < _I64 else {"I": _digits(value)}
    if depth >= MAX_DEPTH and t in (list, tuple, dict) and value:  # its items would be deeper
        raise WireError("value nested too deeply")
    if t is list:
        return {"L": [_encode(v, blobs, depth + 1, tensors, strides) for v in value]}
    if t is tuple:
        return {"U": [_encode(v, blobs, depth + 1, tensors, strides) for v in value]}
    if isinstance(value, torch.Tensor):  # a subclass: reported, never trusted
        if tensors is not None:
            tensors.append(value)
        return _encode_tensor(value, blobs, strides)
    if t is dict and all(type(k) is str for k in value):
        return {"D": [[k, _encode(v, blobs, depth + 1, tensors, strides)] for k, v in value.items()]}
    return {"O": type_name(value), "r": _safe_repr(value)}


_I64 = 1 << 63


def _digits(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise WireError("an int too large to send") from None


def tensors_in(tree: Any) -> list[torch.Tensor]:
    """The tensors of a value tree, in the order both sides of the protocol agree on (gradient
    flags, mutations and differentiable outputs are matched by this order)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in tensors_in(v)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in tensors_in(v)]
    return []


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except BaseException:  # noqa: BLE001 - a hostile __repr__
        return "<unrepresentable>"


ALIGN = 8  # each blob starts on an 8-byte boundary, so tensors can view the payload in place
_ITEMSIZE = {name: torch.empty((), dtype=dt).element_size() for name, dt in DTYPES.items()}
_KINDS = {dt: (name, _ITEMSIZE[name]) for name, dt in DTYPES.items()}  # dtype -> (name, bytes per item)
_PAD = [b"\0" * k for k in range(ALIGN)]


# A strided tensor crosses as the span of memory its strides cover when that span is at most this
# many times its values (plus a little): a transpose or an expansion costs nothing extra, a
# sparse slice of a large tensor is sent as contiguous values instead.
STRIDED_SPAN_FACTOR = 4


def span(shape: Any, stride: Any) -> int:
    """Elements of memory a layout covers, from its first element to its last (0 when empty)."""
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, stride))


def _encode_tensor(t: torch.Tensor, blobs: list, strides: bool = False) -> dict:
    if type(t) is torch.Tensor:
        rg = t.requires_grad
        plain = t.detach() if rg else t  # numpy() refuses a tensor that requires grad
        sub = None
    else:  # a Tensor subclass: reported, never trusted; its methods are not called
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.detach(t)
        rg = t.requires_grad
        sub = type_name(t)
    kind = _KINDS.get(plain.dtype)
    if kind is None:
        raise WireError(f"unsupported tensor dtype {plain.dtype}")
    name, itemsize = kind
    node = {"T": len(blobs) >> 1, "dtype": name, "shape": list(plain.shape)}
    numel = plain.numel()
    if not (plain.is_cpu and plain.is_contiguous()):
        layout = plain.stride()
        covered = span(plain.shape, layout) if strides and plain.is_cpu else -1
        if 0 < covered <= STRIDED_SPAN_FACTOR * numel + 64:
            node["st"] = list(layout)  # the peer views the span with these strides
            plain, numel = plain.as_strided((covered,), (1,)), covered
        else:
            plain = plain.cpu().contiguous()
    if rg:
        node["rg"] = True  # requires_grad (absent: False)
    if sub:
        node["sub"] = sub
    n = numel * itemsize
    if not n:
        blobs.append(b"")
        blobs.append(b"")
        return node
    if name == "bfloat16":  # numpy has no bfloat16: its bytes through a uint8 view
        blobs.append(memoryview(plain.reshape(-1).view(torch.uint8).numpy()))
    else:
        blobs.append(memoryview(plain.numpy()).cast("B"))
    blobs.append(_PAD[-n % ALIGN])  # padding: an empty bytes object when already aligned
    return node


def tensor_nbytes(node: dict) -> int:
    n = _ITEMSIZE.get(node.get("dtype"))
    shape = node.get("shape")
    if n is None or type(shape) is not list or len(shape) > 8:
        raise WireError("bad tensor node")
    elements = 1  # of the non-zero dimensions: an empty tensor's shape is bounded too
    for s in shape:
        if type(s) is not int or not 0 <= s <= MAX_PAYLOAD:
            raise WireError("bad tensor node")
        n *= s
        elements *= s or 1
    if elements > MAX_PAYLOAD:
        raise WireError("bad tensor node: its shape is absurd")
    if "st" in node:  # strided: the bytes are the span its strides cover
        return _strided_nbytes(node, n)
    return n


def _strided_nbytes(node: dict, nbytes: int) -> int:
    """A strided node's byte count: the span of its strides (one per dimension, each a
    non-negative int), which the tensor's own bytes must hold exactly."""
    shape, st = node["shape"], node["st"]
    if type(st) is not list or len(st) != len(shape) or not 0 < nbytes <= MAX_PAYLOAD or \
            any(type(s) is not int or not 0 <= s <= MAX_PAYLOAD for s in st):
        raise WireError("bad tensor strides")
    return span(shape, st) * _ITEMSIZE[node["dtype"]]


class Message:
    """A decoded frame: ``header`` plus a resolver for the tensor nodes it mentions.

    The header's ``nb`` lists each tensor's byte count, in payload order (each padded to
    ALIGN); a tensor node ``{"T": i, "dtype", "shape"}`` is checked against its count when it
    is decoded."""

    def __init__(self, header: dict, payload: bytearray, *, strides: bool = False):
        self.header = header
        self.payload = payload
        self.strides = strides  # strided tensor nodes accepted (the child's view of a call)
        nb = header.get("nb", [])
        if type(nb) is not list or len(nb) > MAX_NODES:
            raise WireError("bad tensor table")
        starts, pos = [], 0
        for n in nb:
            if type(n) is not int or n < 0:
                raise WireError("bad tensor table")
            starts.append(pos)
            pos += n + (-n % ALIGN)
        if pos != len(payload):
            raise WireError(f"payload holds {len(payload)} bytes, the header describes {pos}")
        self._nb, self._starts = nb, starts
        self._claimed = bytearray(len(nb))  # tensors decoded: each is one node's, once
        # the judge's calls: each decoded tensor by its index, for the alias nodes after it
        self._decoded: list[torch.Tensor | None] = [None] * len(nb) if strides else []
        self._base: int | None = None

    def base_address(self) -> int:
        """The payload's address in memory (0 when empty)."""
        if self._base is None:
            self._base = torch.frombuffer(self.payload, dtype=torch.uint8).data_ptr() if self.payload else 0
        return self._base

    def value(self, tree: Any, tensors: list[torch.Tensor] | None = None) -> Any:
        """The value ``tree`` encodes; its tensors, in order, are appended to ``tensors`` too."""
        return _decode_with(tree, self, 0, [0], tensors)

    def alias(self, node: dict) -> torch.Tensor:
        """``{"A": i}``: the tensor of node ``i``, decoded earlier in this message, again (the
        judge's calls only: a test that passes one tensor as two arguments)."""
        i = node["A"]
        if not self.strides or len(node) != 1 or type(i) is not int or not 0 <= i < len(self._nb) \
                or self._decoded[i] is None:
            raise WireError("bad alias node")
        return self._decoded[i]

    def tensor(self, node: dict) -> torch.Tensor:
        t = self._tensor_of(node)
        if self.strides:
            self._decoded[node["T"]] = t
        return t

    def _tensor_of(self, node: dict) -> torch.Tensor:
        i = node["T"]
        if type(i) is not int or not 0 <= i < len(self._nb):
            raise WireError("bad tensor index")
        if self._claimed[i]:
            raise WireError(f"bad tensor node {i} (a second node for its bytes)")
        k = len(node)
        # the usual node, {"T", "dtype", "shape"} and perhaps "rg": true, checked here in one pass
        if k == 3 or (k == 4 and node.get("rg") is True):
            name, shape = node.get("dtype"), node.get("shape")
            np_dtype = _NUMPY.get(name) if type(name) is str else None
            if np_dtype is not None and type(shape) is list and len(shape) <= 8:
                n = np_dtype.itemsize
                for d in shape:
                    if type(d) is not int or d < 0:
                        raise WireError("bad tensor node")
                    n *= d
                if n and n == self._nb[i]:  # a non-empty tensor, exactly its bytes
                    self._claimed[i] = 1
                    return torch.from_numpy(numpy.ndarray(shape, np_dtype, self.payload, self._starts[i]))
        return self._tensor(node, i)

    def _tensor(self, node: dict, i: int) -> torch.Tensor:
        """Any other node: an empty tensor, bfloat16, a strided view, a flag, or a bad node."""
        if not _TENSOR_KEYS.issuperset(node) or node.get("rg", True) is not True \
                or type(node.get("sub", "")) is not str or len(node.get("sub", "")) > 200:
            raise WireError(f"bad tensor node {i} (a bad field)")
        self._claimed[i] = 1
        n = tensor_nbytes(node)
        if n != self._nb[i]:
            raise WireError(f"tensor {i} has {self._nb[i]} bytes, its node describes {n}")
        name, shape = node["dtype"], node["shape"]
        if n == 0:
            return torch.empty(shape, dtype=DTYPES[name])
        # A view of this message's own payload (aligned): no copy; the payload lives as long
        # as any tensor made from it. A strided node views its own span (checked to hold it).
        st = node.get("st")
        if st is not None and not self.strides:
            raise WireError("a strided tensor where only contiguous ones are accepted")
        np_dtype = _NUMPY.get(name)
        if np_dtype is not None:
            if st is None:
                return torch.from_numpy(numpy.ndarray(shape, np_dtype, self.payload, self._starts[i]))
            size = np_dtype.itemsize
            return torch.from_numpy(numpy.ndarray(shape, np_dtype, self.payload, self._starts[i],
                                                  strides=[s * size for s in st]))
        t = torch.frombuffer(self.payload, dtype=DTYPES[name], count=n // _ITEMSIZE[name],
                             offset=self._starts[i])
        if st is not None:
            return t.as_strided(shape, st)
        return t if len(shape) == 1 else t.view(shape)


def _decode_with(tree: Any, msg: Message, depth: int, count: list,
                 tensors: list[torch.Tensor] | None) -> Any:
    count[0] += 1
    if count[0] > MAX_NODES or depth > MAX_DEPTH:
        raise WireError("value tree too large or too deep")
    kind = type(tree)
    if kind is not dict:
        if tree is None or kind is bool or kind is int or kind is str:
            return tree
        raise WireError("bad value node")
    if "T" in tree:
        t = msg.tensor(tree)
        if tensors is not None:
            tensors.append(t)
        return t
    if "A" in tree:  # the same tensor again (an alias: not a tensor of its own in ``tensors``)
        return msg.alias(tree)
    if len(tree) != 1 and "O" not in tree:  # every other kind of node has exactly one key
        raise WireError("bad value node")
    if "f" in tree:
        v = tree["f"]
        if type(v) is float or (type(v) is int and -_F64 < v < _F64) or v in ("nan", "inf", "-inf"):
            return float(v)
        raise WireError("bad float node")
    items = tree.get("L", tree.get("U"))
    if items is not None:
        if type(items) is not list:
            raise WireError("bad list node")
        out = [_decode_with(v, msg, depth + 1, count, tensors) for v in items]
        return out if "L" in tree else tuple(out)
    if "D" in tree:
        items = tree["D"]
        if type(items) is not list:
            raise WireError("bad dict node")
        d = {}
        for p in items:
            if type(p) is not list or len(p) != 2 or type(p[0]) is not str:
                raise WireError("bad dict node")
            d[p[0]] = _decode_with(p[1], msg, depth + 1, count, tensors)
        return d
    if "I" in tree:
        v = tree["I"]
        if type(v) is str:
            try:
                return int(v)
            except ValueError:  # not digits, or more than Python converts
                pass
        raise WireError("bad int node")
    if "O" in tree:
        name, text = tree["O"], tree.get("r", "")
        if type(name) is not str or type(text) is not str or not {"O", "r"}.issuperset(tree):
            raise WireError("bad opaque node")
        return Opaque(name[:200], text[:200])
    raise WireError("unknown value node")


_TENSOR_KEYS = frozenset(("T", "dtype", "shape", "rg", "sub", "st"))  # a tensor node's fields
_F64 = 1 << 1024  # ints a float node may hold (float() of a larger one overflows)


class Opaque:
    """A value of a type that does not cross the boundary (e.g. a numpy array): its name only."""

    def __init__(self, type_name: str, text: str):
        self.__judge_type__ = type_name
        self.text = text

    def __repr__(self) -> str:
        return f"<{self.__judge_type__}: {self.text}>"
