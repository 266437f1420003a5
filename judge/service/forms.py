"""``POST /submit`` as an HTML form or ``curl -F``: ``multipart/form-data`` (and
``application/x-www-form-urlencoded``) bodies become the JSON body the route validates.

    curl -H "Authorization: Bearer $KEY" -F code=@sol.py -F exercise=gspo http://host:8000/submit

ASGI middleware inside ``Guard`` (the body is already capped and checked as UTF-8 there): the
form's fields ``exercise``, ``code`` (a file or a plain field) and ``mode`` are passed on as a
JSON object, every other field too, so ``SubmitRequest`` rejects unknown ones as it does in JSON.
Parsed with the standard library's MIME parser (no python-multipart dependency).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import urllib.parse

from judge.service.guard import _send_json

FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


class FormError(ValueError):
    pass


def parse_form(content_type: str, body: bytes) -> dict[str, str]:
    """The fields of a form body, by name (text, UTF-8); a field given twice is an error."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        return _unique(pairs)
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not msg.is_multipart():
        raise FormError("the multipart/form-data body has no parts (is its boundary right?)")
    pairs = []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            raise FormError("a part of the form has no name (Content-Disposition: form-data; name=...)")
        payload = part.get_payload(decode=True) or b""
        try:
            pairs.append((str(name), payload.decode("utf-8")))
        except UnicodeDecodeError:
            raise FormError(f"the form field {name!r} is not UTF-8 text") from None
    return _unique(pairs)


def _unique(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in out:
            raise FormError(f"the form field {name!r} is given more than once")
        out[name] = value
    return out


class FormSubmit:
    """Rewrites a form ``POST /submit`` into its JSON equivalent; every other request passes."""

    def __init__(self, app, path: str = "/submit"):
        self.app, self.path = app, path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return await self.app(scope, receive, send)
        ctype = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"content-type"), "")
        if ctype.split(";")[0].strip().lower() not in FORM_TYPES:
            return await self.app(scope, receive, send)
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if not msg.get("more_body", False):
                break
        try:
            fields = parse_form(ctype, bytes(body))
        except (FormError, ValueError) as e:
            return await _send_json(send, 400, {"error": "bad_form", "detail": str(e)})
        data = json.dumps(fields).encode()
        headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": headers}, replay, send)
