"""The one schema of what a sandboxed child may send the judge, checked before anything uses it.

Every header the child sends is untrusted: the submission can write whole frames of its own on
the job socket at any time (at import, inside a call). Each kind of reply is a strict model
here (exact JSON types, no unknown fields, finite numbers in range, bounded lengths and counts,
names that are identifiers); value trees (``result``, ``mutated``, ``eager``, ``grads``,
``flipped``) are checked by ``sandbox.wire`` when they are decoded (node kinds, depth, count,
tensor dtype/shape against the bytes sent). Anything else is a ``MalformedReply``: the
submission's fault, ``runtime_error``.

The honest child (``sandbox.child``) stays within these bounds by construction: it caps its own
messages and names to the same constants.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, Strict, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

from judge.errors import MalformedReply
from sandbox import wire

# Bounds shared with the child (sandbox.child caps what it sends to exactly these).
NAME_MAX, MESSAGE_MAX, WHERE_MAX = wire.NAME_MAX, wire.MESSAGE_MAX, wire.WHERE_MAX
LOAD_MESSAGE_MAX = NAME_MAX + MESSAGE_MAX + WHERE_MAX + 2  # "Type: message (where)"
FUNCTIONS_MAX = 64  # function names in a load reply
LAYERS_MAX = 32  # isolation layers named in a hello
HANDLE_MAX = (1 << 53) - 1  # graph handles (the child counts from 1)
CPU_MS_MAX = 1e10  # the child's CPU time so far, ms (~115 days)
RSS_KB_MAX = 1 << 40  # its peak RSS, kB

_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=_IDENTIFIER)]
Count = Annotated[int, Field(ge=0, le=wire.MAX_PAYLOAD)]
# The child's own (informational) resource use so far: [CPU ms, peak RSS kB], finite, >= 0.
ResourceUse = Annotated[tuple[Annotated[float, Field(ge=0, le=CPU_MS_MAX, allow_inf_nan=False)],
                              Annotated[int, Field(ge=0, le=RSS_KB_MAX)]], Strict(False)]
Layers = Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=LAYERS_MAX)]
Tree = Any  # a value tree: checked node by node by sandbox.wire when decoded


# Each reply is a TypedDict: validation returns a plain dict (the proxy reads it as before).
# Measured for a call's reply: 1.5-2.7 us (quiet to loaded 2-core machine); a BaseModel
# instance costs ~1 us more.
_STRICT = ConfigDict(strict=True, extra="forbid")


@with_config(_STRICT)
class RemoteError(TypedDict):
    """What the submission raised inside a call (its type's name and message only)."""

    type: Name  # the exception type's name, e.g. "ValueError"
    message: NotRequired[Annotated[str, Field(max_length=MESSAGE_MAX)]]  # str(exception), capped
    where: NotRequired[Annotated[str, Field(max_length=WHERE_MAX)]]  # its last frame in submission.py
    kind: NotRequired[Literal["memory_limit"] | None]  # the child's reading: it ran out of memory


@with_config(_STRICT)
class CallOk(TypedDict):
    """A call's result."""

    ok: Literal[True]  # the call returned
    handle: NotRequired[Annotated[int, Field(ge=0, le=HANDLE_MAX)]]  # its autograd graph (0: none kept)
    result: NotRequired[Tree]  # the returned value
    mutated: NotRequired[Tree]  # inputs changed in place: {"D": [[position, new value], ...]}
    flipped: NotRequired[Tree]  # inputs whose requires_grad the call changed, by position
    eager: NotRequired[Tree]  # a scalar loss's gradients for d(loss) = 1, one per input
    nb: NotRequired[Annotated[list[Count], Field(max_length=wire.MAX_NODES)]]  # tensor byte counts
    ru: ResourceUse  # the child's resource use so far


@with_config(_STRICT)
class BackwardOk(TypedDict):
    """The gradients of a kept graph for the output gradients the judge sent."""

    ok: Literal[True]  # the backward pass ran
    grads: NotRequired[Tree]  # one gradient (or None) per input that requires grad
    nb: NotRequired[Annotated[list[Count], Field(max_length=wire.MAX_NODES)]]  # tensor byte counts
    ru: ResourceUse  # the child's resource use so far


@with_config(_STRICT)
class Failed(TypedDict):
    """A call or backward pass that raised."""

    ok: Literal[False]  # it raised
    exc: RemoteError  # what it raised
    ru: ResourceUse  # the child's resource use so far


@with_config(_STRICT)
class Loaded(TypedDict):
    """The submission imported; the declared functions it lacks."""

    ok: Literal[True]  # the module ran
    missing: Annotated[list[Name], Field(max_length=FUNCTIONS_MAX)]  # declared names not callable
    ru: ResourceUse  # the child's resource use so far


@with_config(_STRICT)
class LoadFailed(TypedDict):
    """The submission did not compile or raised at import."""

    ok: Literal[False]  # it could not be loaded
    kind: Literal["syntax_error", "import_error"]  # which
    message: Annotated[str, Field(max_length=LOAD_MESSAGE_MAX)]  # the error, for the learner
    line: NotRequired[Annotated[int, Field(ge=0, le=HANDLE_MAX)] | None]  # a syntax error's line
    ru: ResourceUse  # the child's resource use so far


@with_config(_STRICT)
class Hello(TypedDict):
    """The child's first message, before any submission code ran: its isolation layers."""

    event: Literal["hello"]  # always "hello"
    layers: Layers  # the isolation layers in force
    missing: NotRequired[Layers]  # those this machine cannot provide


@with_config(ConfigDict(strict=True, extra="allow"))
class Envelope(TypedDict):
    """Any reply, as far as the job itself reads it (its resource use); the caller checks the
    rest against the kind it expects."""

    ok: Annotated[bool, Strict()]  # whether the request succeeded
    ru: ResourceUse  # the child's resource use so far


class Schema:
    """One kind of reply: ``check(header)`` returns it validated (a new dict), or raises
    ``MalformedReply``. ``ok`` (exactly True or False, never 1 or 0) picks the model."""

    def __init__(self, name: str, ok: type, failed: type | None = None):
        self.name = name
        self._ok = TypeAdapter(ok).validate_python
        self._failed = TypeAdapter(failed).validate_python if failed is not None else None

    def check(self, header: Any, during: str = "") -> dict:
        validate = self._ok
        if self._failed is not None:
            ok = header.get("ok") if type(header) is dict else None
            if ok is False:
                validate = self._failed
            elif ok is not True:  # Literal[True] alone would take 1
                raise self._malformed(during, "ok: Input should be true or false")
        try:
            return validate(header)
        except ValidationError as e:
            raise self._malformed(during, describe(e)) from None

    def _malformed(self, during: str, why: str) -> MalformedReply:
        what = f"reply during {during}" if during else self.name
        return MalformedReply(f"the submission's process sent a malformed {what}: {why}")


def describe(e: ValidationError) -> str:
    """A short, bounded account of what was wrong (never the offending value itself)."""
    errors = e.errors(include_url=False, include_input=False, include_context=False)
    parts = [f"{'.'.join(map(str, err['loc'])) or 'header'}: {err['msg']}" for err in errors[:3]]
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts)[:400] + more


CALL = Schema("reply to a call", CallOk, Failed)
BACKWARD = Schema("reply to a backward pass", BackwardOk, Failed)
LOAD = Schema("reply to loading the submission", Loaded, LoadFailed)
HELLO = Schema("hello", Hello)
ANY = Schema("reply", Envelope)
