"""The one schema of the child's replies: honest replies pass, and every field the submission
could forge is checked for its type, range, length and count; a malformed reply is the
submission's fault (``MalformedReply``, runtime_error) and its message never echoes the value."""

from __future__ import annotations

import math

import pytest

from judge.box import replies
from judge.errors import MalformedReply
from sandbox import child, wire

RU = [12.5, 40_000]
CALL_OK = {"ok": True, "handle": 3, "result": {"T": 0, "dtype": "float64", "shape": [2]},
           "nb": [16], "ru": RU}


def test_honest_replies_of_every_kind_pass():
    assert replies.CALL.check(CALL_OK)["ru"] == (12.5, 40_000)
    assert replies.CALL.check({"ok": True, "result": None, "ru": RU})["ok"] is True
    failed = {"ok": False, "exc": {"type": "ValueError", "message": "m", "where": "", "kind": None},
              "ru": RU}
    assert replies.CALL.check(failed)["exc"]["type"] == "ValueError"
    assert replies.BACKWARD.check({"ok": True, "grads": {"L": [None]}, "ru": RU})["ok"]
    assert replies.LOAD.check({"ok": True, "missing": ["f"], "ru": RU})["missing"] == ["f"]
    assert replies.LOAD.check({"ok": False, "kind": "syntax_error", "message": "line 1: x",
                               "line": 1, "ru": RU})["kind"] == "syntax_error"
    assert replies.HELLO.check({"event": "hello", "layers": ["landlock"], "missing": []})
    assert replies.ANY.check({"ok": True, "ru": RU, "anything": 1})["anything"] == 1


class _Odd(Exception):
    def __str__(self):
        return "m" * 1_000_000


def test_the_honest_child_stays_within_the_schema_whatever_it_raises():
    """A class named with spaces, newlines and 10k characters, a 1 MB message, a function with a
    10k-character name: the child's own report of it is within the bounds the judge checks."""
    name = "Bad name\n" * 1200
    odd = type(name, (_Odd,), {})
    fn_name = "f" * 10_000
    ns: dict = {"odd": odd}
    exec(compile(f"def {fn_name}():\n    raise odd()\n", child.SUBMISSION_FILE, "exec"), ns)
    try:
        ns[fn_name]()
    except _Odd as e:
        item = child._exception_item(e)
    checked = replies.CALL.check({**item, "ru": RU})["exc"]
    assert checked["type"].startswith("Bad_name_") and len(checked["type"]) <= wire.NAME_MAX
    assert len(checked["message"]) == wire.MESSAGE_MAX and len(checked["where"]) <= wire.WHERE_MAX


@pytest.mark.parametrize("header,field", [
    ({**CALL_OK, "ru": [1.0, math.nan]}, "ru.1"),
    ({**CALL_OK, "ru": [math.nan, 1]}, "ru.0"),
    ({**CALL_OK, "ru": [math.inf, 1]}, "ru.0"),
    ({**CALL_OK, "ru": [-1.0, 1]}, "ru.0"),
    ({**CALL_OK, "ru": [1.0, 2 ** 60]}, "ru.1"),
    ({**CALL_OK, "ru": ["1", 2]}, "ru.0"),
    ({**CALL_OK, "ru": [1.0, 2, 3]}, "ru"),
    ({**CALL_OK, "ru": None}, "ru"),
    ({k: v for k, v in CALL_OK.items() if k != "ru"}, "ru"),
    ({**CALL_OK, "ok": 1}, "ok"),
    ({**CALL_OK, "ok": "true"}, "ok"),
    ({**CALL_OK, "handle": True}, "handle"),
    ({**CALL_OK, "handle": -1}, "handle"),
    ({**CALL_OK, "handle": 2 ** 60}, "handle"),
    ({**CALL_OK, "nb": [-8]}, "nb.0"),
    ({**CALL_OK, "nb": 16}, "nb"),
    ({**CALL_OK, "nb": [0] * (wire.MAX_NODES + 1)}, "nb"),
    ({**CALL_OK, "missing": []}, "missing"),
    ({"ok": False, "exc": {"type": "Value Error"}, "ru": RU}, "exc.type"),
    ({"ok": False, "exc": {"type": "E" * 101}, "ru": RU}, "exc.type"),
    ({"ok": False, "exc": {"type": ""}, "ru": RU}, "exc.type"),
    ({"ok": False, "exc": {"type": "E", "message": "m" * 2001}, "ru": RU}, "exc.message"),
    ({"ok": False, "exc": {"type": "E", "where": "w" * (wire.WHERE_MAX + 1)}, "ru": RU}, "exc.where"),
    ({"ok": False, "exc": {"type": "E", "kind": "time_limit"}, "ru": RU}, "exc.kind"),
    ({"ok": False, "exc": "ValueError", "ru": RU}, "exc"),
    ({"ok": False, "exc": {"type": "E", "x": 1}, "ru": RU}, "exc.x"),
    ("not a dict", "ok"),
])
def test_a_forged_call_reply_is_malformed(header, field):
    with pytest.raises(MalformedReply) as e:
        replies.CALL.check(header, "a call to f")
    assert e.value.kind == "runtime_error"
    assert f"during a call to f: {field}" in e.value.message, e.value.message
    assert len(e.value.message) < 600 and "m" * 100 not in e.value.message


@pytest.mark.parametrize("header,field", [
    ({"ok": True, "missing": 5, "ru": RU}, "missing"),
    ({"ok": True, "missing": ["x" * 40_000], "ru": RU}, "missing.0"),
    ({"ok": True, "missing": ["f"] * 65, "ru": RU}, "missing"),
    ({"ok": True, "missing": ["not a name"], "ru": RU}, "missing.0"),
    ({"ok": False, "kind": "internal", "message": "", "ru": RU}, "kind"),
    ({"ok": False, "kind": "import_error", "message": "m" * (replies.LOAD_MESSAGE_MAX + 1), "ru": RU}, "message"),
    ({"ok": False, "kind": "syntax_error", "message": "", "line": -1, "ru": RU}, "line"),
])
def test_a_forged_load_reply_is_malformed(header, field):
    with pytest.raises(MalformedReply, match=f"loading the submission: {field}"):
        replies.LOAD.check(header)


def test_a_bad_hello_and_a_bad_envelope_are_malformed():
    with pytest.raises(MalformedReply, match="layers"):
        replies.HELLO.check({"event": "hello", "layers": ["x" * 201]})
    with pytest.raises(MalformedReply, match="ok"):
        replies.ANY.check({"ok": 1, "ru": RU})
