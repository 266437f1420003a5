"""The API's plumbing, kept out of the routes: errors as JSON, the request guard (authentication,
body size, UTF-8), the per-client rate limit, change notification. Files: ``judge.service.files``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time

from judge.service.store import Store

log = logging.getLogger("judge.service.app")
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs",
                          "/docs/oauth2-redirect", "/redoc"})
SUBMISSION_ID = re.compile(r"^[0-9a-f]{24}$")


class ApiError(Exception):
    """An error answered as ``{"error": code, "detail": ...}`` with ``status``."""

    def __init__(self, status: int, error: str, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.error, self.detail, self.headers = status, error, detail, headers or {}

    def body(self) -> dict:
        return {"error": self.error, "detail": self.detail}


def client_id(key: str) -> str:
    """What the database knows of a client: a hash of its key, never the key."""
    return hashlib.sha256(b"judge-client\0" + key.encode()).hexdigest()[:32]


async def _send_json(send, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": data})


class Guard:
    """ASGI middleware in front of every route: a valid bearer key (except on the public paths),
    and for request bodies a size cap and UTF-8, before anything parses them."""

    def __init__(self, app, *, keys: tuple[str, ...], max_body: int):
        self.app = app
        self.clients = {client_id(k) for k in keys}
        self.max_body = max_body

    def _client(self, scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, key = value.decode("latin-1").partition(" ")
                key = key.strip()
                if scheme.lower() != "bearer" or not key:
                    return None
                cid = client_id(key)
                return cid if any(hmac.compare_digest(cid, c) for c in self.clients) else None
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] not in PUBLIC_PATHS:
            client = self._client(scope)
            if client is None:
                return await _send_json(send, 401, {"error": "unauthorized", "detail":
                                        "send a valid API key: 'Authorization: Bearer <key>'"},
                                        {"WWW-Authenticate": "Bearer"})
            scope.setdefault("state", {})["client"] = client
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        too_big = {"error": "body_too_large", "detail": f"the request body is limited to {self.max_body} bytes"}
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                return await _send_json(send, 413, too_big)
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if len(body) > self.max_body:
                return await _send_json(send, 413, too_big)
            if not msg.get("more_body", False):
                break
        try:
            bytes(body).decode("utf-8")
        except UnicodeDecodeError as e:
            return await _send_json(send, 400, {"error": "not_utf8", "detail":
                                    f"the request body is not UTF-8 ({e.reason} at byte {e.start})"})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class RateLimiter:
    """A token bucket per client: ``per_minute`` refill, ``burst`` capacity."""

    def __init__(self, per_minute: float, burst: int):
        self.rate, self.burst = per_minute / 60.0, float(burst)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, client: str) -> float:
        """0 when allowed (a token is spent), else the seconds until the next token."""
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self.buckets[client] = (tokens - 1.0, now)
                return 0.0
            self.buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.rate


class Changes:
    """Wakes waiters (``?wait=``, event streams, artifact requests) when a submission changes.

    Pushed: after committing a change to a submission, a worker writes a line to a pipe (``fd``):
    ``s<id>`` when its result or state changed (verdict, artifacts, error, retry), ``e<id>`` when
    it only has new events (test results, "running"). The event loop reads it (``add_reader``)
    and wakes that submission's watches at once; only event streams (``events=True``) wake for
    the latter. Polled as a fallback, for a lost notification or a change made by another
    process: one look at the events table's largest id per ``interval``, whatever the number of
    waiters, and only while someone waits.

    A waiter holds a ``Watch`` (``watch()``) from before its first read of the state to its
    last wait: a notification that comes while it is busy elsewhere (reading in a thread,
    sending what it read to a slow client) is kept, and its next ``wait`` returns at once. With
    a bare wait after a read, such a notification found nobody waiting and was lost: the waiter
    slept until the poll, or, on a node whose poll is slow, until its own timeout.
    """

    def __init__(self, store: Store, interval: float, fd: int | None = None):
        self.store, self.interval, self.fd = store, interval, fd
        self._watches: dict[tuple[str, bool], set[Watch]] = {}  # (id, events) → its watches
        self._last = -1
        self._partial = b""
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Begin listening (in the running event loop)."""
        try:
            self._last = self.store.last_change()
        except self.store.errors:
            pass
        if self.fd is not None:
            os.set_blocking(self.fd, False)
            asyncio.get_running_loop().add_reader(self.fd, self._readable)
        self._task = asyncio.create_task(self._poll())

    def stop(self) -> None:
        self.stop_reading()
        if self._task is not None:
            self._task.cancel()

    def _readable(self) -> None:
        data = self._partial
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # the pipe is gone: the poll still runs
                chunk = b""
            if not chunk:  # every writer closed it
                self.stop_reading()
                break
            data += chunk
        *lines, self._partial = data.split(b"\n")
        for line in set(lines):
            sid = line[1:].decode("ascii", "replace")
            self._wake((sid, True))
            if line[:1] != b"e":
                self._wake((sid, False))

    def stop_reading(self) -> None:
        if self.fd is not None:
            asyncio.get_running_loop().remove_reader(self.fd)
            self.fd = None

    def _wake(self, key: tuple[str, bool]) -> None:
        for w in self._watches.get(key, ()):
            w.changed.set()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if not self._watches:
                continue
            try:
                v = self.store.last_change()
            except self.store.errors:
                continue
            if v != self._last:
                self._last = v
                for key in list(self._watches):
                    self._wake(key)

    def watch(self, sid: str, *, events: bool = False) -> "Watch":
        """Start watching ``sid`` (``events``: its new events too): take it before reading the
        state, wait on it after, and close it (``with``) when done."""
        w = Watch(self, (sid, events))
        self._watches.setdefault(w.key, set()).add(w)
        return w

    def _unwatch(self, w: "Watch") -> None:
        ws = self._watches.get(w.key)
        if ws is not None:
            ws.discard(w)
            if not ws:
                del self._watches[w.key]

    async def wait(self, sid: str, timeout: float, *, events: bool = False) -> bool:
        """True if ``sid``'s result or state changed (``events``: or it has new events), or may
        have, before ``timeout`` seconds. Only for a caller whose read of the state and this
        call have no ``await`` between them; any other takes a ``watch`` first."""
        with self.watch(sid, events=events) as w:
            return await w.wait(timeout)


class Watch:
    """One waiter's interest in a submission's changes, from ``Changes.watch`` until closed."""

    def __init__(self, changes: Changes, key: tuple[str, bool]):
        self.changes, self.key = changes, key  # its Changes; (submission id, events too)
        self.changed = asyncio.Event()  # set by a change notified since the last wait returned

    async def wait(self, timeout: float) -> bool:
        """True once a change was notified since the watch began or the last ``wait`` returned
        True (at once if one already was), False after ``timeout`` seconds without one."""
        if not self.changed.is_set():
            if timeout <= 0:
                return False
            try:
                await asyncio.wait_for(self.changed.wait(), timeout)
            except asyncio.TimeoutError:
                return False
        self.changed.clear()
        return True

    def close(self) -> None:
        self.changes._unwatch(self)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
