"""The learner's web page, served by the API's own app (``install(app, service)``).

* ``Session`` (ASGI middleware, outside ``Guard``): the sign-in cookie. A learner signs in once
  with their API key; it is kept in a signed, HttpOnly, SameSite=Strict cookie (never in
  localStorage or a URL). A request with that cookie and no ``Authorization`` header is passed on
  with the key as a bearer token, so the page uses the API itself (``POST /submit``, the event
  stream, artifacts) and sees only its learner's submissions. Every unsafe request made with the
  cookie must carry the CSRF token (``X-CSRF-Token``, or a ``csrf`` form field): an HMAC of a
  per-browser nonce cookie. Every response gets the Content-Security-Policy (``script-src
  'self'``, no inline scripts or styles) and the usual hardening headers.
* The public part (no key needed): ``/static`` (the built bundle), ``/signin``, ``/signout``
  and ``/docs`` (Swagger UI from the local npm package, not a CDN).
* The pages (behind ``Guard``): ``/`` (the exercises and the learner's status) and
  ``/exercises/<slug>`` (spec, editor, Run/Submit, progress, result, plots, history). The latter
  shares its path with the API's JSON route: it answers only requests that ask for HTML.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.routing import APIRoute
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Match, Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from judge.service.guard import SUBMISSION_ID, ApiError, client_id, log
from judge.models import Verdict
from judge.service.routers.common import Service, document_off_loop
from judge.service.spec_html import SpecRenderError, render_spec

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
BUNDLE = STATIC / "dist"  # built by scripts/build-web.sh (git-ignored)
SESSION_COOKIE = "judge_session"
NONCE_COOKIE = "judge_csrf"
SESSION_SECONDS = 30 * 24 * 3600
PLOTS_WAIT = 60.0  # seconds /pages/submissions/<id>/drawn waits for plots drawn after the verdict
CSRF_HEADER = b"x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PREFIXES = ("/static/",)
PUBLIC_PATHS = frozenset({"/signin", "/signout", "/docs"})
FORM_MAX = 4096  # bytes of a sign-in or sign-out form
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
       "frame-ancestors 'none'; form-action 'self'")
# Swagger UI sets style attributes as it draws; its scripts stay 'self'
CSP_BYTES = CSP.encode()
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"), (b"cross-origin-opener-policy", b"same-origin")]

templates = Jinja2Templates(directory=str(HERE / "templates"))


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def session_secret(data_dir: Path) -> bytes:
    """The key that signs cookies: made once, kept (mode 0600) in the data dir, so a restart
    keeps learners signed in; ``JUDGE_SESSION_SECRET`` overrides it (several API processes)."""
    env = os.environ.get("JUDGE_SESSION_SECRET", "").strip()
    if env:
        return env.encode()
    path = Path(data_dir) / "session-secret"
    try:
        data = path.read_bytes().strip()
        if len(data) >= 32:
            return data
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    data = secrets.token_urlsafe(48).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data + b"\n")
    return data


class Signer:
    """Signs and checks the session cookie (``key.issued.mac``) and derives CSRF tokens."""

    def __init__(self, secret: bytes, keys: tuple[str, ...]):
        self.secret = secret
        self.clients = {client_id(k) for k in keys}

    def _mac(self, purpose: str, value: str) -> str:
        return _b64(hmac.new(self.secret, f"{purpose}\0{value}".encode(), hashlib.sha256).digest())

    def valid_key(self, key: str) -> bool:
        cid = client_id(key)
        return any(hmac.compare_digest(cid, c) for c in self.clients)

    def session(self, key: str, now: float | None = None) -> str:
        body = f"{_b64(key.encode())}.{int(now if now is not None else time.time())}"
        return f"{body}.{self._mac('session', body)}"

    def key_of(self, cookie: str | None, now: float | None = None) -> str | None:
        """The key a session cookie holds, if it is ours, unexpired and still a valid key."""
        if not cookie or cookie.count(".") != 2:
            return None
        body, mac = cookie.rsplit(".", 1)
        if not hmac.compare_digest(mac, self._mac("session", body)):
            return None
        encoded, issued = body.split(".")
        if not issued.isdigit() or (now if now is not None else time.time()) - int(issued) > SESSION_SECONDS:
            return None
        try:
            key = _unb64(encoded).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        return key if self.valid_key(key) else None

    def csrf(self, nonce: str) -> str:
        return self._mac("csrf", nonce)

    def csrf_ok(self, nonce: str | None, token: str | None) -> bool:
        return bool(nonce and token) and hmac.compare_digest(token, self.csrf(nonce))


def cookies(scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k and k not in out:
                    out[k] = v
    return out


def header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return v.decode("latin-1")
    return None


def wants_html(scope) -> bool:
    return "text/html" in (header(scope, b"accept") or "")


def cookie_header(name: str, value: str, max_age: int) -> tuple[bytes, bytes]:
    return (b"set-cookie", f"{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict".encode())


class Session:
    """ASGI middleware: the sign-in cookie, CSRF, the public pages, the security headers."""

    def __init__(self, app, *, signer: Signer, public):
        self.app, self.signer, self.public = app, signer, public

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        jar = cookies(scope)
        extra: list[tuple[bytes, bytes]] = []
        public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
        page = public or wants_html(scope)  # a page or its assets: an API call needs neither nonce
        nonce = jar.get(NONCE_COOKIE, "")
        if not (16 <= len(nonce) <= 64 and nonce.replace("-", "").replace("_", "").isalnum()):
            nonce = ""
            if page:
                nonce = secrets.token_urlsafe(24)
                extra.append(cookie_header(NONCE_COOKIE, nonce, SESSION_SECONDS))
        state = scope.setdefault("state", {})
        state["csrf_nonce"] = nonce
        csp = CSP_BYTES
        if path == "/docs":
            csp = DOCS_CSP.encode()
        elif page:
            # CodeMirror mounts its styles in a <style> element: the page's own bundle passes
            # this response's nonce (EditorView.cspNonce); nothing else may add a style element
            state["style_nonce"] = secrets.token_urlsafe(16)
            csp = CSP.replace("style-src 'self'", f"style-src 'self' 'nonce-{state['style_nonce']}'").encode()

        async def send_hardened(msg):
            if msg["type"] == "http.response.start":
                names = {k.lower() for k, _ in msg.get("headers", [])}
                hdrs = list(msg.get("headers", [])) + extra
                if b"content-security-policy" not in names:
                    hdrs.append((b"content-security-policy", csp))
                hdrs += [h for h in SECURITY_HEADERS if h[0] not in names]
                msg = {**msg, "headers": hdrs}
            await send(msg)

        if public:
            return await self.public(scope, receive, send_hardened)
        if header(scope, b"authorization") is None:
            raw = jar.get(SESSION_COOKIE)
            key = self.signer.key_of(raw)
            if key is not None:
                if method not in SAFE_METHODS and not self.signer.csrf_ok(
                        nonce, header(scope, CSRF_HEADER.lower())):
                    return await JSONResponse({"error": "csrf", "detail": "this request needs the page's "
                                               "CSRF token (X-CSRF-Token): reload the page"},
                                              status_code=403)(scope, receive, send_hardened)
                scope = {**scope, "headers": [*scope["headers"], (b"authorization", f"Bearer {key}".encode())]}
                state["signed_in"] = True
            elif method in SAFE_METHODS and wants_html(scope) and (path == "/" or path.startswith("/exercises/")):
                if raw:
                    extra.append(cookie_header(SESSION_COOKIE, "", 0))
                target = path + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else "")
                return await RedirectResponse("/signin?next=" + quote(target, safe=""), status_code=303)(
                    scope, receive, send_hardened)
        await self.app(scope, receive, send_hardened)


def safe_next(target: str | None) -> str:
    """Only a path of this site (never ``//host`` or a scheme): an open redirect otherwise."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def read_form(request: Request) -> dict[str, str] | None:
    """A small urlencoded form, or None when it is too large or not one."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_MAX:
            return None
    try:
        pairs = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in pairs.items()}


def public_app(signer: Signer) -> Router:
    """What needs no key: the bundle, sign-in, sign-out, the API's docs."""

    def render(request: Request, name: str, status: int = 200, **ctx) -> HTMLResponse:
        ctx.setdefault("csrf", signer.csrf(request.scope["state"]["csrf_nonce"]))
        ctx.setdefault("style_nonce", request.scope["state"].get("style_nonce", ""))
        return templates.TemplateResponse(request, name, ctx, status_code=status)

    async def signin(request: Request):
        if request.method == "GET":
            return render(request, "signin.html", next=safe_next(request.query_params.get("next")), error=None)
        form = await read_form(request)
        if form is None:
            return render(request, "signin.html", 400, next="/", error="That form was not one this page sent.")
        target = safe_next(form.get("next"))
        if not signer.csrf_ok(request.scope["state"]["csrf_nonce"], form.get("csrf")):
            return render(request, "signin.html", 403, next=target,
                          error="The form expired (its CSRF token did not match): try again.")
        key = form.get("key", "").strip()
        if not key or not signer.valid_key(key):
            return render(request, "signin.html", 401, next=target, error="That API key is not valid.")
        response = RedirectResponse(target, status_code=303)
        response.headers.append(*[h.decode() for h in cookie_header(SESSION_COOKIE, signer.session(key), SESSION_SECONDS)])
        return response

    async def signout(request: Request):
        form = await read_form(request) or {}
        if not signer.csrf_ok(request.scope["state"]["csrf_nonce"], form.get("csrf")):
            return PlainTextResponse("sign-out needs the page's CSRF token: reload the page", status_code=403)
        response = RedirectResponse("/signin", status_code=303)
        response.headers.append(*[h.decode() for h in cookie_header(SESSION_COOKIE, "", 0)])
        return response

    async def docs(request: Request):
        return render(request, "docs.html")

    return Router(routes=[Route("/signin", signin, methods=["GET", "POST"]),
                          Route("/signout", signout, methods=["POST"]),
                          Route("/docs", docs, methods=["GET"]),
                          Mount("/static", GZipMiddleware(StaticFiles(directory=str(STATIC), check_dir=False),
                                                         minimum_size=512))])


class HtmlRoute(APIRoute):
    """A page that shares its path with an API route: it matches only requests asking for HTML."""

    def matches(self, scope):
        match, child = super().matches(scope)
        if match != Match.NONE and not wants_html(scope):
            return Match.NONE, {}
        return match, child


def status_of(pairs: set[tuple[str, str]]) -> str:
    """The learner's standing on an exercise: accepted (a Submit accepted), rejected (graded,
    never accepted on Submit), or not tried."""
    if ("submit", "accepted") in pairs:
        return "accepted"
    return "rejected" if pairs else "not tried"


def page_router(s: Service, signer: Signer) -> APIRouter:
    r = APIRouter(route_class=HtmlRoute, include_in_schema=False)

    def ctx(request: Request, **kw) -> dict:
        return {"csrf": signer.csrf(request.scope["state"]["csrf_nonce"]),
                "style_nonce": request.scope["state"].get("style_nonce", ""),
                "signed_in": request.scope["state"].get("signed_in", False), **kw}

    @r.get("/", response_class=HTMLResponse)
    def index(request: Request):
        done = s.store.outcomes(s.client(request))
        items = [{"slug": slug, "title": ex.title, "summary": ex.summary, "paper": ex.paper,
                  "status": status_of(done.get(slug, set()))} for slug, ex in sorted(s.catalog.items())]
        return templates.TemplateResponse(request, "index.html", ctx(request, exercises=items))

    @r.get("/exercises/{slug}", response_class=HTMLResponse)
    def exercise_page(slug: str, request: Request):
        ex = s.exercise_of(slug)
        try:
            spec, spec_error = render_spec(ex.spec_path), None
        except SpecRenderError as e:
            log.error("spec of %s: %s", slug, e.message)
            spec, spec_error = None, e.message
        previews = [n for n, _ in s.blobs.list(s.previews[slug]) or () if n.endswith(".vl.json")]
        data = {"slug": slug, "starter": ex.starter_path.read_text(), "previews": previews}
        return templates.TemplateResponse(request, "exercise.html", ctx(
            request, ex=ex, spec=spec, spec_error=spec_error, data=data))

    return r


def data_router(s: Service) -> APIRouter:
    """JSON and text the page reads besides the API's own routes (the learner's history of one
    exercise, an attempt's source): the caller's own submissions only, like the API."""
    r = APIRouter(prefix="/pages", include_in_schema=False)

    @r.get("/exercises/{slug}/history")
    def history(slug: str, request: Request):
        s.exercise_of(slug)
        rows = s.store.history(s.client(request), slug)
        return [{"id": x["id"], "mode": x["mode"], "status": x["status"], "verdict": x["outcome"],
                 "created_at": x["created_at"], "finished_at": x["finished_at"]} for x in rows]

    @r.get("/submissions/{sid}/drawn")
    async def drawn(sid: str, request: Request):
        """The submission's document once its plots are drawn (they are kept just after the
        verdict: ``artifacts_pending``), waiting up to ``PLOTS_WAIT`` seconds: the page asks
        once, woken by the worker's notification, instead of polling the document."""
        def look() -> tuple[dict, bool]:  # in a worker thread: the verdict may be large
            row = s.owned(request, sid)
            return row, bool(row["verdict"]) and Verdict.model_validate_json(row["verdict"]).artifacts_pending

        with s.changes.watch(sid) as changed:  # before the read: plots kept during it are seen
            row, pending = await run_in_threadpool(look)
            deadline = time.monotonic() + PLOTS_WAIT
            while pending and time.monotonic() < deadline:
                await changed.wait(deadline - time.monotonic())
                row, pending = await run_in_threadpool(look)
        return Response(await document_off_loop(row), media_type="application/json")

    @r.get("/submissions/{sid}/code")
    def code(sid: str, request: Request):
        src = s.store.code(sid, s.client(request)) if SUBMISSION_ID.match(sid) else None
        if src is None:
            raise ApiError(404, "not_found", f"no submission {sid!r}")
        return PlainTextResponse(src, media_type="text/plain; charset=utf-8")

    return r


def warm_specs(s: Service) -> None:
    """Render every spec once, in the background, so the first page view does not wait."""
    def run():
        for slug, ex in sorted(s.catalog.items()):
            try:
                render_spec(ex.spec_path)
            except SpecRenderError as e:
                log.error("spec of %s: %s", slug, e.message)
            except Exception:  # noqa: BLE001 - the page renders (or reports) it again when asked
                log.exception("rendering the spec of %s", slug)
    threading.Thread(target=run, name="specs", daemon=True).start()


def install(app: FastAPI, s: Service) -> None:
    """Add the pages to ``app``: call after the API's routers and its ``Guard`` are added."""
    if not (BUNDLE / "page.js").is_file():
        log.warning("the page's bundle is not built (%s): run `make setup` or scripts/build-web.sh", BUNDLE)
    signer = Signer(session_secret(s.cfg.data_dir), s.cfg.api_keys)
    app.include_router(data_router(s))
    pages = page_router(s, signer)
    before = len(app.router.routes)
    app.include_router(pages)
    added = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[0:0] = added  # ahead of the API's GET /exercises/{slug}: HtmlRoute decides
    app.add_middleware(Session, signer=signer, public=public_app(signer))
    warm_specs(s)

