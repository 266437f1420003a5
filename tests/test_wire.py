"""The wire format: round trips, and malformed frames from a hostile peer are WireErrors."""

import json
import socket
import struct

import pytest
import torch

from sandbox import wire


def roundtrip(value):
    a, b = socket.socketpair()
    blobs = []
    tree = wire.encode(value, blobs)
    wire.send(a, {"v": tree}, blobs)
    header, payload = wire.Reader(b).recv()
    return wire.Message(header, payload).value(header["v"])


def test_tensors_and_plain_values_round_trip():
    t = torch.tensor([[1.5, float("nan")], [float("inf"), -0.0]], dtype=torch.float64)
    value = [t, torch.arange(3), torch.tensor(True), 1.25, float("-inf"), 3, "s", None,
             (torch.zeros(0, 4, dtype=torch.float32),), {"k": torch.tensor(2.0, dtype=torch.bfloat16)}]
    out = roundtrip(value)
    assert torch.equal(out[0].isnan(), t.isnan()) and out[0][1, 0] == float("inf")
    assert out[0].dtype == torch.float64 and out[1].tolist() == [0, 1, 2]
    assert out[3] == 1.25 and out[4] == float("-inf") and out[5:8] == [3, "s", None]
    assert isinstance(out[8], tuple) and out[8][0].shape == (0, 4)
    assert out[9]["k"].dtype == torch.bfloat16 and float(out[9]["k"]) == 2.0


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json only"])
def test_what_orjson_refuses_round_trips_through_json(fast, monkeypatch):
    """Headers go through orjson where it is installed; what it refuses (a lone surrogate, an
    int beyond 64 bits, whose literal it would read as a float) comes back exactly as sent."""
    if not fast:
        monkeypatch.setattr(wire, "orjson", None)
    elif wire.orjson is None:
        pytest.skip("orjson is not installed")
    # each in a frame of its own: a surrogate sends its whole frame through json both ways
    strings = ["lone \ud800 surrogate", {"k\udfff": 1}]
    assert roundtrip(strings) == strings
    huge = [2 ** 63, -(2 ** 63) - 1, 10 ** 40, 2 ** 63 - 1, -(2 ** 63)]
    out = roundtrip([*huge, 0.1, 1e-300, float("nan")])
    assert out[:5] == huge and all(type(x) is int for x in out[:5])
    assert out[5:7] == [0.1, 1e-300] and out[7] != out[7]


def test_malformed_int_nodes_are_rejected():
    for node in ({"I": "12x"}, {"I": 12}, {"I": "9" * 5000}):
        with pytest.raises(wire.WireError, match="int"):
            wire.Message({}, bytearray()).value({"L": [node]})
    if wire.orjson is None:
        return
    # an int literal beyond 64 bits is not an int node: orjson reads it as a float, refused
    with pytest.raises(wire.WireError):
        header = wire._header(b'{"v": {"L": [123456789012345678901234567890]}}')
        wire.Message(header, bytearray()).value(header["v"])


@pytest.mark.parametrize("dtype", list(wire.DTYPES.values()))
def test_every_dtype_keeps_its_bytes_whatever_the_layout(dtype):
    base = (torch.arange(24).reshape(4, 6) % 7 - 3).to(dtype)
    for t in (base, base.t(), base[1:3, ::2], base[0, 0], base[:0]):  # contiguous or not, 0-d, empty
        out = roundtrip([t])[0]
        assert out.dtype == dtype and out.shape == t.shape and torch.equal(out, t)


def test_unsupported_values_become_opaque_names_not_objects():
    import numpy as np
    out = roundtrip([np.zeros(3), object()])
    assert out[0].__judge_type__ == "numpy.ndarray"
    assert out[1].__judge_type__ == "object"


def test_tensor_subclass_is_reported():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True
    blobs = []
    node = wire.encode(torch.zeros(2).as_subclass(Liar), blobs)
    assert node["sub"].endswith("Liar")


def frame(header: dict, payload: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("!II", len(head), len(payload)) + head + payload


@pytest.mark.parametrize("header,payload,match", [
    ({"nb": [16], "v": {"T": 0, "dtype": "float32", "shape": [4]}}, b"\0" * 8, "payload"),  # too few bytes
    ({"nb": [8], "v": {"T": 0, "dtype": "float32", "shape": [4]}}, b"\0" * 8, "describes 16"),
    ({"nb": [8], "v": {"T": 0, "dtype": "object", "shape": [1]}}, b"\0" * 8, "bad tensor"),
    ({"nb": [4], "v": {"T": 1, "dtype": "float32", "shape": [1]}}, b"\0" * 8, "index"),
    ({"nb": [4], "v": {"T": True, "dtype": "float32", "shape": [1]}}, b"\0" * 8, "index"),
    ({"nb": [0], "v": {"T": 0, "dtype": "float32", "shape": [-1]}}, b"", "bad tensor"),
    ({"nb": [-8], "v": 1}, b"", "table"),
    ({"nb": {"0": 8}, "v": 1}, b"\0" * 8, "table"),
])
def test_malformed_tensor_nodes_are_rejected(header, payload, match):
    a, b = socket.socketpair()
    a.sendall(frame(header, payload))
    h, p = wire.Reader(b).recv()
    with pytest.raises(wire.WireError, match=match):
        wire.Message(h, p).value(h["v"])


def test_a_tensor_table_that_does_not_cover_the_payload_is_rejected():
    with pytest.raises(wire.WireError, match="payload holds 16 bytes"):
        wire.Message({"nb": [4]}, bytearray(16))
    with pytest.raises(wire.WireError, match="payload holds 0 bytes"):
        wire.Message({"nb": [1]}, bytearray())


def test_oversized_and_garbage_frames_are_rejected():
    a, b = socket.socketpair()
    a.sendall(struct.pack("!II", 10, wire.MAX_PAYLOAD + 1))
    with pytest.raises(wire.WireError, match="too large"):
        wire.Reader(b).recv()
    a.sendall(struct.pack("!II", 3, 0) + b"{x]")
    with pytest.raises(wire.WireError, match="bad header"):
        wire.Reader(b).recv()


def test_deeply_nested_values_are_rejected():
    deep = {"L": []}
    node = deep
    for _ in range(40):
        child = {"L": []}
        node["L"].append(child)
        node = child
    with pytest.raises(wire.WireError):
        wire.Message({"v": deep}, bytearray()).value(deep)


def test_encode_and_decode_list_the_tensors_that_cross_in_the_same_order():
    import collections
    Pair = collections.namedtuple("Pair", "a b")
    x, y, z, w = (torch.full((2,), float(i)) for i in range(4))
    value = [x, (y, {"k": z}), Pair(w, w), {1: w}]  # a namedtuple, a non-str key: opaque, no tensors
    sent: list = []
    blobs: list = []
    tree = wire.encode(value, blobs, tensors=sent)
    assert [t is u for t, u in zip(sent, (x, y, z))] == [True] * 3 and len(sent) == 3
    got: list = []
    header, payload = wire.unframe(wire.frame({"v": tree}, blobs))
    out = wire.Message(header, payload).value(header["v"], got)
    assert [float(t[0]) for t in got] == [0.0, 1.0, 2.0]
    assert got[0] is out[0] and got[2] is out[1][1]["k"]


def test_a_non_blocking_reader_waits_for_the_rest_of_a_frame_until_its_deadline():
    import time
    a, b = socket.socketpair()
    b.setblocking(False)
    data = frame({"v": 1}, b"\0" * 8)
    a.sendall(data[:5])  # a peer that stops mid-frame
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.Reader(b).recv(deadline=t + 0.05)
    assert time.monotonic() - t >= 0.04
    a.sendall(data)  # a whole frame is read at once, with no waiting
    c, d = socket.socketpair()
    d.setblocking(False)
    c.sendall(data)
    header, payload = wire.Reader(d).recv(deadline=time.monotonic() + 1)
    assert header == {"v": 1} and bytes(payload) == b"\0" * 8


def test_send_until_gives_up_on_a_peer_that_does_not_read():
    import time
    a, b = socket.socketpair()
    a.setblocking(False)
    wire.send_until(a, b"x" * 100, time.monotonic() + 1)  # room: sent at once
    assert b.recv(100) == b"x" * 100
    with pytest.raises(TimeoutError):
        wire.send_until(a, b"x" * (64 << 20), time.monotonic() + 0.05)  # more than the buffers hold


def test_a_reader_returns_frames_that_arrived_together_one_at_a_time():
    a, b = socket.socketpair()
    reader = wire.Reader(b)
    frames = []
    for i in range(3):
        blobs = []
        tree = wire.encode([torch.full((i + 1,), float(i))], blobs)
        frames.append(wire.frame({"v": tree, "i": i}, blobs))
    a.sendall(b"".join(frames))  # three frames in one write: read in one recv
    for i in range(3):
        header, payload = reader.recv()
        assert header["i"] == i
        assert wire.Message(header, payload).value(header["v"])[0].tolist() == [float(i)] * (i + 1)
    assert not reader.poll(0.001)  # nothing left over, nothing more sent
    a.sendall(frames[0][:3])  # a frame's first bytes: pending, the rest is waited for
    assert reader.poll(0)
    a.sendall(frames[0][3:])
    assert reader.recv()[0]["i"] == 0
    a.close()
    assert reader.poll(0)  # the peer's end is news too: the next recv says so
    with pytest.raises(EOFError):
        reader.recv()


def test_a_reader_reads_a_large_payload_straight_into_its_buffer_and_no_further():
    a, b = socket.socketpair()
    a.setblocking(False)
    reader = wire.Reader(b)
    big = torch.arange(300_000, dtype=torch.float64)  # 2.4 MB: more than the socket buffers
    blobs = []
    tree = wire.encode([big], blobs)
    data = wire.frame({"v": tree}, blobs) + wire.frame({"next": 1})
    import threading
    sender = threading.Thread(target=wire.send_until, args=(a, data, __import__("time").monotonic() + 5))
    sender.start()
    header, payload = reader.recv()
    sender.join()
    assert torch.equal(wire.Message(header, payload).value(header["v"])[0], big)
    assert reader.recv()[0] == {"next": 1}  # the following frame was not swallowed


def test_unframe_reads_a_frame_held_in_memory():
    blobs = []
    tree = wire.encode({"x": torch.ones(3, dtype=torch.int32)}, blobs)
    header, payload = wire.unframe(wire.frame({"v": tree}, blobs))
    assert wire.Message(header, payload).value(header["v"])["x"].tolist() == [1, 1, 1]
    with pytest.raises(wire.WireError, match="truncated"):
        wire.unframe(wire.frame({"v": tree}, blobs)[:-1])


def test_a_large_payload_that_stops_midway_times_out_at_the_deadline():
    import time
    a, b = socket.socketpair()
    b.setblocking(False)
    big = torch.zeros(100_000, dtype=torch.float64)  # 800 kB: read straight into its buffer
    blobs = []
    data = wire.frame({"v": wire.encode([big], blobs)}, blobs)
    a.setblocking(False)
    sent = a.send(data[:len(data) // 2])  # half of it, then nothing
    assert 0 < sent < len(data)
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.Reader(b).recv(deadline=t + 0.05)
    assert time.monotonic() - t >= 0.04


def strided_roundtrip(value, strides=True):
    """What the child decodes from a call the judge encoded ``strides=True``; and the bytes sent."""
    blobs = []
    tree = wire.encode(value, blobs, strides=strides)
    header, payload = wire.unframe(wire.frame({"v": tree}, blobs))
    return wire.Message(header, payload, strides=True).value(header["v"]), len(payload)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_non_contiguous_tensors_cross_with_their_strides(dtype):
    base = (torch.arange(24).reshape(4, 6) % 5).to(dtype)
    row = (torch.arange(6) % 2).to(dtype)
    views = {"transposed": base.t(), "sliced": base[1:3, 1:5], "stepped": base[::2, ::3],
             "expanded": row.expand(5, 6), "broadcast column": base[:, :1].expand(4, 3),
             "3-d permuted": base.reshape(2, 3, 4).permute(2, 0, 1)}
    for what, view in views.items():
        (got,), _ = strided_roundtrip([view])
        assert got.stride() == view.stride(), what
        assert got.is_contiguous() == view.is_contiguous() and torch.equal(got, view), what


def test_a_strided_tensor_sends_the_memory_it_covers_not_its_expansion():
    row = torch.arange(8, dtype=torch.float64)
    (got,), nbytes = strided_roundtrip([row.expand(1000, 8)])
    assert got.shape == (1000, 8) and got.stride() == (0, 1) and nbytes == 8 * 8
    (dense,), nbytes = strided_roundtrip([row.expand(1000, 8)], strides=False)  # the child's answers
    assert dense.is_contiguous() and nbytes == 1000 * 8 * 8
    sparse = torch.zeros(1000, 1000)[::100, ::100]  # its span is 10^4 times its values: compacted
    (got,), nbytes = strided_roundtrip([sparse])
    assert got.is_contiguous() and nbytes == 100 * 4 and torch.equal(got, sparse)


def test_strided_nodes_are_refused_unless_accepted_and_checked_against_their_bytes():
    blobs = []
    tree = wire.encode([torch.arange(6.0).reshape(2, 3).t()], blobs, strides=True)
    header, payload = wire.unframe(wire.frame({"v": tree}, blobs))
    with pytest.raises(wire.WireError, match="strided"):  # the judge reads the child's answers so
        wire.Message(header, payload).value(header["v"])
    node = header["v"]["L"][0]
    for bad in ([1], [1, "3"], [1, -3], [1, 4], [0, 0], [1, 2 ** 40]):  # wrong rank, type, sign, span
        forged = {**node, "st": bad}
        with pytest.raises(wire.WireError):
            wire.Message(header, payload, strides=True).value({"L": [forged]})
    # a huge expansion of one element: refused, though it would fit the bytes
    one = {"T": 0, "dtype": "float64", "shape": [1 << 20, 1 << 20], "st": [0, 0]}
    with pytest.raises(wire.WireError):
        wire.Message({"nb": [8]}, bytearray(8), strides=True).value(one)


def test_a_tensor_passed_twice_crosses_once_and_arrives_as_one_object():
    x, y = torch.arange(3.0), torch.arange(3.0)
    blobs, sent = [], []
    tree = wire.encode([x, y, x, {"k": x}], blobs, tensors=sent, strides=True)
    assert len(sent) == 2 and len(blobs) == 4  # x's bytes once
    header, payload = wire.unframe(wire.frame({"v": tree}, blobs))
    got = []
    a, b, c, d = wire.Message(header, payload, strides=True).value(header["v"], got)
    assert a is c is d["k"] and a is not b and len(got) == 2  # each tensor once in the flat list
    # the child's answers are decoded without aliases: its own nodes, once each
    with pytest.raises(wire.WireError, match="alias"):
        wire.Message(header, payload).value(header["v"])
    for bad in ({"A": 1}, {"A": 5}, {"A": "0"}, {"A": 0, "dtype": "float64"}, {"A": -1}):
        with pytest.raises(wire.WireError, match="alias"):  # undecoded, absent, malformed
            wire.Message({"nb": [8, 8]}, bytearray(16), strides=True).value(
                {"L": [{"T": 0, "dtype": "float64", "shape": [1]}, bad]})


# --- decoding an untrusted peer's values: every node strict, every tensor claimed once -----------

def _message(header: dict, payload: bytes = b"") -> wire.Message:
    return wire.Message(header, bytearray(payload))


def test_a_tensor_claimed_by_two_nodes_is_rejected():
    node = {"T": 0, "dtype": "float64", "shape": [1]}
    msg = _message({"nb": [8]}, b"\0" * 8)
    with pytest.raises(wire.WireError, match="second node"):
        msg.value({"L": [node, node]})
    msg = _message({"nb": [8]}, b"\0" * 8)
    msg.value(node)  # across the values of one message too (result, then mutated)
    with pytest.raises(wire.WireError, match="second node"):
        msg.value({"D": [["0", node]]})


@pytest.mark.parametrize("node", [
    {"T": 0, "dtype": "float64", "shape": [0] + [1 << 28] * 7},  # empty, but torch overflows
    {"T": 0, "dtype": "float64", "shape": [0, wire.MAX_PAYLOAD, 2]},
    {"T": 0, "dtype": "float64", "shape": [0], "rg": 1},
    {"T": 0, "dtype": "float64", "shape": [0], "sub": 7},
    {"T": 0, "dtype": "float64", "shape": [0], "sub": "S" * 201},
    {"T": 0, "dtype": "float64", "shape": [0], "extra": True},
])
def test_bad_fields_of_an_empty_tensor_node_are_rejected(node):
    with pytest.raises(wire.WireError):
        _message({"nb": [0]}).value(node)


@pytest.mark.parametrize("tree", [
    {"f": 10 ** 400},  # float() of it overflows
    {"f": True},
    {"f": 1.0, "L": [{"T": 0, "dtype": "float64", "shape": [1]}]},  # one node, two kinds
    {"L": [], "U": []},
    {"I": "12", "x": 1},
    {"O": ["list"], "r": "x"},
    {"O": "numpy.ndarray", "r": 5},
    {"O": "numpy.ndarray", "extra": 1},
])
def test_nodes_of_the_wrong_shape_are_rejected(tree):
    with pytest.raises(wire.WireError):
        _message({"nb": [8]}, b"\0" * 8).value(tree)


def test_an_opaque_node_and_a_big_float_still_decode():
    msg = _message({})
    assert repr(msg.value({"O": "numpy.ndarray", "r": "array([1])"})) == "<numpy.ndarray: array([1])>"
    assert msg.value({"f": 10 ** 300}) == 1e300


def test_a_reader_refuses_a_frame_over_its_caps_before_reading_it_and_counts_what_it_read():
    a, b = socket.socketpair()
    reader = wire.Reader(b, max_payload=1 << 10, max_header=64)
    a.sendall(wire.frame({"ok": True}) + struct.pack("!II", 65, 0))
    assert reader.recv()[0] == {"ok": True}
    assert reader.received == 8 + len(b'{"ok":true}')
    with pytest.raises(wire.FrameTooLarge, match="65 header bytes"):
        reader.recv()
    assert reader.received == 8 + len(b'{"ok":true}')  # nothing of it: the job ends here
    a.close(), b.close()
    a, b = socket.socketpair()
    a.sendall(struct.pack("!II", 2, (1 << 10) + 1))
    with pytest.raises(wire.FrameTooLarge, match="1025 payload bytes"):
        wire.Reader(b, max_payload=1 << 10).recv()
    a.close(), b.close()
