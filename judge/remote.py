"""``judge submit``: grade a file on a judge service (``POST /submit``), follow its progress
(``GET /submissions/{id}/events``, server-sent events) and return the service's ``Verdict``, which
the CLI prints as ``judge local`` does. Standard library only (the CLI needs no HTTP client).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Callable, Iterator

from judge.errors import ServiceError, UsageError
from judge.models import Verdict

TIMEOUT_S = 90.0  # seconds without a byte from the service before giving up (it sends keep-alives every 15 s)


def _request(url: str, key: str, *, data: bytes | None = None, accept: str = "application/json"):
    headers = {"Accept": accept}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - the URL the user gave
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read() or b"{}")
            detail = body.get("detail") or body.get("error") or ""
        except (ValueError, AttributeError):
            detail = ""
        detail = str(detail)[:500] or e.reason
        if e.code in (400, 401, 404, 413, 415, 422, 429):
            hint = " (give --key or set JUDGE_API_KEY)" if e.code == 401 else ""
            raise UsageError(f"the service refused the submission ({e.code}): {detail}{hint}") from None
        raise ServiceError(f"the service answered {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ServiceError(f"could not reach the judge service at {url}: {getattr(e, 'reason', e)}") from None


def events(response) -> Iterator[tuple[str, str]]:
    """(event, data) of a server-sent event stream, as they arrive (comments skipped)."""
    event, data = "message", []
    for raw in response:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)


def submit(server: str, key: str, exercise: str, code: str, *, mode: str = "submit",
           on_event: Callable[[str, dict], None] | None = None) -> Verdict:
    """Queue ``code`` for ``exercise`` on the service at ``server``; return its verdict once graded.
    ``on_event(kind, data)`` sees each status change and test result as it happens."""
    base = server.rstrip("/")
    body = json.dumps({"exercise": exercise, "code": code, "mode": mode}).encode()
    with _request(base + "/submit", key, data=body) as r:
        accepted = json.loads(r.read())
    sid = accepted.get("id")
    if not isinstance(sid, str):
        raise ServiceError(f"the service's answer to POST /submit names no submission: {str(accepted)[:200]}")
    with _request(f"{base}/submissions/{sid}/events", key, accept="text/event-stream") as stream:
        for event, data in events(stream):
            try:
                doc = json.loads(data)
            except ValueError:
                continue
            if event == "end":
                verdict = _verdict(doc)
                return _with_artifacts(base, key, sid, verdict) if verdict.artifacts_pending else verdict
            if on_event is not None and isinstance(doc, dict):
                on_event(event, doc)
    raise ServiceError(f"the event stream of submission {sid} ended before its verdict")


ARTIFACTS_WAIT_S = 60.0  # how long to wait for plots still being drawn after the verdict


def _with_artifacts(base: str, key: str, sid: str, verdict: Verdict) -> Verdict:
    """The verdict once its plots are drawn (the service answers before drawing them), so the
    table lists the artifacts as ``judge local``'s does; the early verdict if they take too long."""
    deadline, pause = time.monotonic() + ARTIFACTS_WAIT_S, 0.02
    while time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
        with _request(f"{base}/submissions/{sid}", key) as r:
            later = _verdict(json.loads(r.read()))
        if not later.artifacts_pending:
            return later
    return verdict


def _verdict(doc: dict) -> Verdict:
    if doc.get("status") == "error" or doc.get("verdict") is None:
        raise ServiceError(f"the service could not grade it: {doc.get('message') or doc.get('status')}")
    return Verdict.model_validate(doc["verdict"])
