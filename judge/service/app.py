"""The judge as a service: ``create_app(config)`` builds the FastAPI app; ``serve`` runs it.

The API process never grades: it commits submissions to SQLite and answers from it; grading
workers (``judge.service.worker``, started by ``judge.service.pool``) claim them. The routes are
three routers (``judge.service.routers``: submissions, exercises, operations) over one ``Service``;
plumbing is in ``judge.service.guard``.
"""

from __future__ import annotations

import os
import secrets
import sys
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from judge.service.artifacts import blob_store
from judge.service.catalog import load_catalog, previews_of
from judge.service.config import Config
from judge.service.files import Transfers
from judge.service.forms import FormSubmit
from judge.service.guard import SUBMISSION_ID, ApiError, Changes, Guard, RateLimiter, log
from judge.service.pool import WorkerPool
from judge.service.remote_changes import RemoteChanges
from judge.service import pages
from judge.service.routers import exercises, operations, submissions
from judge.service.routers.common import Service
from judge.service.routers.submissions import LAST_EVENT_ID
from judge.service.store import Store

STATUS_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
                413: "body_too_large", 415: "unsupported_media_type", 422: "invalid_request",
                429: "rate_limited", 503: "unavailable"}


def create_app(cfg: Config) -> FastAPI:
    store = Store(cfg.database_url, synchronous="FULL")
    catalog = load_catalog(cfg)
    previews = {slug: previews_of(ex) for slug, ex in catalog.items()}
    limiter = RateLimiter(cfg.rate_limit, cfg.burst)
    transfers = Transfers(cfg.max_transfers, cfg.client_transfers)
    # on PostgreSQL the workers take Procrastinate tickets (judge.service.worker_host.DispatchHost)
    pool = WorkerPool(cfg, store, {s: ex.limits.total_seconds for s, ex in catalog.items()},
                      dispatched=store.backend.name == "postgresql") if cfg.workers > 0 else None
    dispatcher: list = []
    # an API-only node on PostgreSQL hears other hosts' commits (LISTEN), else the pool's pipe
    remote = RemoteChanges(store) if pool is None and store.backend.name == "postgresql" else None
    changes = Changes(store, cfg.notify_interval, pool.changes_fd if pool is not None else
                      remote.fd if remote is not None else None)
    service = Service(cfg=cfg, store=store, catalog=catalog, previews=previews,
                      blobs=blob_store(cfg.data_dir, store), limiter=limiter,
                      transfers=transfers, pool=pool, changes=changes)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # one host (SQLite): whatever was running was ours; on PostgreSQL other hosts may be
        # grading, so only the stalled (no heartbeat) are taken back
        recovered = store.recover(message="the service stopped while grading it") \
            if store.backend.name == "sqlite" else store.reap_stalled()
        if recovered:
            log.warning("recovered %d interrupted submission(s): %s", len(recovered), recovered)
        if pool is not None:
            pool.start()
            if pool.dispatched:
                from judge.service.worker_host import DispatchHost

                dispatcher.append(DispatchHost(cfg, store, pool).start())
        changes.start()
        if remote is not None:
            remote.start()
        try:
            yield
        finally:
            changes.stop()
            if remote is not None:
                remote.stop()
            if dispatcher:
                await run_in_threadpool(dispatcher[0].stop)  # the pool too
            elif pool is not None:
                await run_in_threadpool(pool.stop)

    app = FastAPI(title="judge", version="0.1.0", lifespan=lifespan,
                  description="Grades implementations of ML papers. Authenticate with "
                              "`Authorization: Bearer <key>`.")
    app.state.store, app.state.pool, app.state.config, app.state.transfers = store, pool, cfg, transfers
    app.state.blobs = service.blobs

    # --- errors: always JSON, never a 500 for bad input -------------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": STATUS_CODES.get(exc.status_code, "http_error"), "detail": str(exc.detail)},
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse({"error": "malformed_json", "detail": "the request body is not valid JSON",
                                 "errors": errors}, status_code=400)
        detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors)
        return JSONResponse({"error": "invalid_request", "detail": detail, "errors": errors}, status_code=422)

    # --- the routes, one router each ----------------------------------------------------------
    for module in (submissions, exercises, operations):
        app.include_router(module.router(service))

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            prop = schema["components"]["schemas"]["SubmitRequest"]["properties"]["exercise"]
            prop["enum"] = sorted(catalog)
            schema["paths"]["/submit"]["post"]["description"] += (
                "\n\nThe same fields are accepted as multipart/form-data (`curl -F code=@sol.py "
                "-F exercise=gspo`) or application/x-www-form-urlencoded.")
            # optional parameters: absent, or a string of this form (never a JSON null)
            for path, name, pattern in (("/submissions", "cursor", SUBMISSION_ID.pattern),
                                        ("/submissions/{sid}/events", "last-event-id", LAST_EVENT_ID.pattern)):
                for param in schema["paths"][path]["get"]["parameters"]:
                    if param["name"] == name:
                        param["schema"] = {"type": "string", "pattern": pattern}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    app.add_middleware(FormSubmit)  # POST /submit as multipart/form-data (curl -F), inside Guard
    # JSON escapes can take six bytes per byte of code; anything larger cannot be a valid submission.
    app.add_middleware(Guard, keys=cfg.api_keys, max_body=6 * cfg.max_source_bytes + 4096)
    pages.install(app, service)  # the learner's page: its routes, the sign-in cookie, the CSP
    return app


def local_key(data_dir: Path) -> str:
    """The key of ``make serve`` when JUDGE_API_KEYS is unset: made once, kept in the data dir."""
    path = Path(data_dir) / "api-key"
    try:
        key = path.read_text().strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def serve(cfg: Config, host: str, port: int) -> int:
    """Run the service until interrupted; prints its URL and (when it made one) its key."""
    import uvicorn

    made = not cfg.api_keys
    if made:
        cfg = replace(cfg, api_keys=(local_key(cfg.data_dir),))
    os.environ.pop("JUDGE_API_KEYS", None)  # the workers (and so the sandboxes) never see the keys
    app = create_app(cfg)
    url = f"http://{host}:{port}"
    print(f"judge: serving on {url} with {cfg.workers} worker(s); database {cfg.database_name}", flush=True)
    if made:
        print(f"judge: API key (kept in {Path(cfg.data_dir) / 'api-key'}): {cfg.api_keys[0]}\n"
              f"judge: try  curl -H 'Authorization: Bearer {cfg.api_keys[0]}' {url}/exercises", flush=True)
    else:
        print(f"judge: {len(cfg.api_keys)} API key(s) from JUDGE_API_KEYS", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
    pool = app.state.pool
    if pool is not None and pool.fatal:
        print(f"judge: {pool.fatal}", file=sys.stderr)
        return 4
    return 0
