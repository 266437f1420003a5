"""The judge as a service: ``create_app(config)`` builds the FastAPI app; ``serve`` runs it.

The API process never grades: it commits submissions to SQLite and answers from it; grading
workers (``judge.service.worker``, started by ``judge.service.pool``) claim them. Routes stay thin; plumbing is in ``judge.service.guard``.
"""

from __future__ import annotations

import mimetypes
import os
import re
import secrets
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from datetime import datetime, timezone
from typing import Any

from fastapi import FastAPI, Header, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from judge.service.schemas import (Accepted, ErrorBody, ExerciseDetail, ExerciseSummary, FunctionInfo,
                              Health, LimitsInfo, Preview, Readiness, Submission, SubmissionPage,
                              SubmissionSummary, SubmitRequest)
from judge.service.guard import SUBMISSION_ID, ApiError, Changes, Guard, RateLimiter, log
from judge.service.catalog import load_catalog, preview_dir
from judge.tuning import INLINE_DOCUMENT_BYTES  # a larger verdict is parsed and serialized off the event loop
from judge.service.config import Config
from judge.service.files import FileStream, Transfers, list_regular_files, open_regular_file
from judge.models import Verdict
from judge.service.store import QueueFull, Store
from judge.service.pool import WorkerPool
from judge.service.worker import artifacts_dir

bearer = HTTPBearer(auto_error=False, description="an API key from JUDGE_API_KEYS")
AUTH = [Security(bearer)]  # declares the scheme in the OpenAPI document; Guard enforces it
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
                413: "body_too_large", 415: "unsupported_media_type", 422: "invalid_request",
                429: "rate_limited", 503: "unavailable"}
SSE_MAX_SECONDS = 600.0
LAST_EVENT_ID = re.compile(r"^[0-9]{1,9}$")


def _err(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorBody} for c in (401, *codes)}


def _ts(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc)


def _document(row: dict) -> Submission:
    sid = row["id"]
    return Submission(
        id=sid, exercise=row["exercise"], mode=row["mode"], status=row["status"],
        attempts=row["attempts"], created_at=_ts(row["created_at"]), started_at=_ts(row["started_at"]),
        finished_at=_ts(row["finished_at"]), message=row["message"],
        verdict=Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None,
        links={"self": f"/submissions/{sid}", "events": f"/submissions/{sid}/events"})


def _document_json(row: dict) -> str:
    return _document(row).model_dump_json()


async def _document_off_loop(row: dict) -> str:
    """The whole document as JSON: built in a worker thread when its verdict is large."""
    if len(row["verdict"] or "") > INLINE_DOCUMENT_BYTES:
        return await run_in_threadpool(_document_json, row)
    return _document_json(row)


FILE_CONTENT = {t: {"schema": {"type": "string", "format": "binary"}} for t in
                ("image/png", "image/svg+xml", "text/csv", "text/plain", "application/octet-stream")}
FILE_CONTENT["application/json"] = {"schema": {}}
SSE_EVENT = {"type": "object", "description": "one server-sent event (OpenAPI 3.1: the schema of each event)",
             "properties": {"id": {"type": "string"}, "event": {"type": "string", "enum": ["status", "test", "end"]},
                            "data": {"type": "string", "description": "JSON: a status change, a test result "
                                     "(tier, name, status, message…), or at the end the whole document"}},
             "required": ["event", "data"]}


ARTIFACT_WAIT = 30.0  # seconds an artifact request waits for plots still being drawn


def create_app(cfg: Config) -> FastAPI:
    store = Store(cfg.database_path, synchronous="FULL")
    catalog = load_catalog(cfg)
    previews = {slug: preview_dir(cfg, ex) for slug, ex in catalog.items()}
    limiter = RateLimiter(cfg.rate_limit, cfg.burst)
    transfers = Transfers(cfg.max_transfers, cfg.client_transfers)
    pool = WorkerPool(cfg, store, {s: ex.limits.total_seconds for s, ex in catalog.items()}) \
        if cfg.workers > 0 else None
    changes = Changes(store, cfg.notify_interval, pool.changes_fd if pool is not None else None)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        recovered = store.recover(message="the service stopped while grading it")
        if recovered:
            log.warning("recovered %d interrupted submission(s): %s", len(recovered), recovered)
        if pool is not None:
            pool.start()
        changes.start()
        try:
            yield
        finally:
            changes.stop()
            if pool is not None:
                await run_in_threadpool(pool.stop)

    app = FastAPI(title="judge", version="0.1.0", lifespan=lifespan,
                  description="Grades implementations of ML papers. Authenticate with "
                              "`Authorization: Bearer <key>`.")
    app.state.store, app.state.pool, app.state.config, app.state.transfers = store, pool, cfg, transfers

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

    def client(request: Request) -> str:
        return request.state.client  # set by Guard, which already refused anyone else

    def owned(request: Request, sid: str) -> dict:
        row = store.get(sid, client(request)) if SUBMISSION_ID.match(sid) else None
        if row is None:
            raise ApiError(404, "not_found", f"no submission {sid!r}")
        return row

    def exercise_of(slug: str):
        ex = catalog.get(slug)
        if ex is None:
            raise ApiError(404, "unknown_exercise", f"unknown exercise {slug!r}; expected one of: "
                           f"{', '.join(sorted(catalog)) or 'none'}")
        return ex

    async def wait_done(sid: str, timeout: float) -> bool:
        """True once ``sid`` is done or failed, False if not within ``timeout`` seconds (only its
        status is read meanwhile, in the event loop: a tiny row)."""
        deadline = time.monotonic() + timeout
        while True:
            if store.status(sid) in ("done", "error"):
                return True
            if not await changes.wait(sid, deadline - time.monotonic()):
                return store.status(sid) in ("done", "error")

    def serve_file(who: str, opened: tuple[int, int] | None, media_type: str, name: str,
                   missing: str) -> FileStream:
        """Stream an opened file (``open_regular_file``), within the caps on transfers."""
        if opened is None:
            raise ApiError(404, "not_found", missing)
        refused = transfers.take(who)
        if refused is not None:
            os.close(opened[0])
            if refused == "client":
                raise ApiError(429, "too_many_transfers", f"at most {cfg.client_transfers} downloads "
                               "of one client at once; finish one first", {"Retry-After": "1"})
            raise ApiError(503, "transfers_busy", f"the server is sending {cfg.max_transfers} files "
                           "already; try again shortly", {"Retry-After": "1"})
        return FileStream(*opened, media_type, name, done=lambda: transfers.release(who))

    # --- submissions ------------------------------------------------------------------------
    @app.post("/submit", dependencies=AUTH, status_code=202, response_model=Accepted, tags=["submissions"],
              responses={200: {"model": Submission, "description": "graded within ?wait="},
                         202: {"headers": {"Location": {"schema": {"type": "string"},
                                                        "description": "the submission's URL"}}},
                         **_err(400, 413, 422, 429, 503)})
    async def submit(body: SubmitRequest, request: Request, response: Response,
                     wait: float | None = Query(None, ge=0, le=60, description="seconds to wait for the verdict")):
        """Queue a submission. With ``?wait=``, answer 200 with the whole document if it is graded in time."""
        who = client(request)
        if body.exercise not in catalog:
            raise ApiError(422, "unknown_exercise", f"unknown exercise {body.exercise!r}; expected one of: "
                           f"{', '.join(sorted(catalog)) or 'none'}")
        try:
            size = len(body.code.encode("utf-8"))
        except UnicodeEncodeError:
            raise ApiError(422, "not_utf8", "code is not valid UTF-8 text (it holds a lone surrogate)") from None
        if size > cfg.max_source_bytes:
            raise ApiError(413, "code_too_large", f"code is {size} bytes; a submission is at most "
                           f"{cfg.max_source_bytes} bytes of UTF-8")
        if "\x00" in body.code:
            raise ApiError(422, "invalid_code", "code contains a NUL character; Python source cannot")
        retry = limiter.take(who)
        if retry:
            raise ApiError(429, "rate_limited", f"at most {cfg.rate_limit:g} submissions a minute",
                           {"Retry-After": str(max(1, round(retry + 0.5)))})
        try:
            sid = await run_in_threadpool(store.add, who, body.exercise, body.mode, body.code,
                                          queue_max=cfg.queue_max, client_max=cfg.client_queue_max)
        except QueueFull as e:
            if e.scope == "client":
                raise ApiError(429, "client_queue_full", f"you have {e.limit} submissions queued or "
                               "running already; wait for some to be graded", {"Retry-After": "5"}) from None
            raise ApiError(503, "queue_full", "the grading queue is full; try again shortly",
                           {"Retry-After": "5"}) from None
        if pool is not None:
            pool.notify()
        location = f"/submissions/{sid}"
        if wait and await wait_done(sid, min(wait, cfg.wait_max)):
            doc = await _document_off_loop(store.get(sid, None))
            return Response(doc, status_code=200, media_type="application/json",
                            headers={"Location": location})
        response.headers["Location"] = location
        return Accepted(id=sid, status="queued")

    @app.get("/submissions", dependencies=AUTH, response_model=SubmissionPage, tags=["submissions"],
             responses=_err(400, 422))
    def list_submissions(request: Request, limit: int = Query(20, ge=1, le=100),
                         cursor: str | None = Query(None, description=(
                             "next_cursor of the previous page (opaque: it names a position in "
                             "your own list, nothing else); any other value is a 400"),
                             json_schema_extra={"pattern": SUBMISSION_ID.pattern})):  # enforced below: 400
        """The caller's own submissions, newest first."""
        if cursor is not None and not SUBMISSION_ID.match(cursor):
            raise ApiError(400, "bad_cursor", "cursor is not one this server gave you: pass next_cursor "
                           "of the previous page unchanged")
        rows = store.list(client(request), limit=limit, after=cursor)
        if rows is None:
            raise ApiError(400, "bad_cursor", "cursor is not a position in your list of submissions: "
                           "pass next_cursor of the previous page unchanged")
        items = [SubmissionSummary(id=r["id"], exercise=r["exercise"], mode=r["mode"], status=r["status"],
                                   verdict=r["outcome"], created_at=_ts(r["created_at"]),
                                   finished_at=_ts(r["finished_at"])) for r in rows]
        return SubmissionPage(items=items, next_cursor=rows[-1]["id"] if len(rows) == limit else None)

    @app.get("/submissions/{sid}", dependencies=AUTH, response_model=Submission, tags=["submissions"], responses=_err(404))
    def get_submission(sid: str, request: Request):
        """A submission's status and, once graded, its verdict."""
        # built here, in the route's worker thread, not by FastAPI in the event loop
        return Response(_document_json(owned(request, sid)), media_type="application/json")

    def listed_artifact(request: Request, sid: str, name: str):
        """(the artifact ``name`` of the verdict or None, whether its plots are still pending)."""
        row = owned(request, sid)
        verdict = Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None
        if verdict is None:
            return None, False
        return next((a for a in verdict.artifacts if a.name == name), None), verdict.artifacts_pending

    @app.get("/submissions/{sid}/artifacts/{name}", dependencies=AUTH, response_class=Response, tags=["submissions"],
             responses={200: {"content": FILE_CONTENT, "description": "the file"}, **_err(400, 404, 429, 503)})
    async def get_artifact(sid: str, name: str, request: Request):
        """A file the submission's experiment wrote (a plot, metrics.json), with its media type,
        streamed from disk. Plots are drawn just after the verdict: while they are pending this
        waits for them. 429 or 503 when too many downloads are in flight (the client's or all)."""
        art, pending = await run_in_threadpool(listed_artifact, request, sid, name)
        deadline = time.monotonic() + ARTIFACT_WAIT
        while pending and time.monotonic() < deadline:
            await changes.wait(sid, deadline - time.monotonic())
            art, pending = await run_in_threadpool(listed_artifact, request, sid, name)
        opened = await run_in_threadpool(open_regular_file, artifacts_dir(cfg, sid), name) if art else None
        return serve_file(client(request), opened, art.media_type if art else "", name,
                          f"submission {sid} has no artifact {name!r}")

    @app.get("/submissions/{sid}/events", dependencies=AUTH, response_class=Response, tags=["submissions"],
             responses={200: {"content": {"text/event-stream": {"schema": SSE_EVENT}},
                              "description": "server-sent events: status, test, and a final end"},
                        **_err(400, 404)})
    async def get_events(sid: str, request: Request, last_event_id: str | None = Header(
            None, description="resume after this event (the id of the last one received; past "
            "the last event sent: from the end); anything but a number is a 400",
            json_schema_extra={"pattern": LAST_EVENT_ID.pattern})):  # enforced below: 400
        """Tier progress as server-sent events; the last one (``end``) carries the whole document.
        Events are numbered 1, 2, … within the submission's stream (its ids)."""
        owned(request, sid)
        number = 0  # how many of this submission's events the client has
        if last_event_id is not None:
            if not LAST_EVENT_ID.match(last_event_id):
                raise ApiError(400, "bad_last_event_id", "Last-Event-ID must be the id of an event "
                               f"of this stream (1, 2, …), got {last_event_id[:40]!r}")
            number = int(last_event_id)
        after, number = store.resume_point(sid, number)  # the events table's id to resume after

        async def stream():
            deadline = time.monotonic() + SSE_MAX_SECONDS
            nonlocal after, number
            while time.monotonic() < deadline:
                status = store.status(sid)
                for e in store.events(sid, after):
                    after, number = e["id"], number + 1
                    yield f"id: {number}\nevent: {e['kind']}\ndata: {e['data']}\n\n"
                if status in ("done", "error"):
                    doc = await _document_off_loop(store.get(sid, None))
                    yield f"event: end\ndata: {doc}\n\n"
                    return
                if not await changes.wait(sid, min(15.0, deadline - time.monotonic()), events=True):
                    yield ": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # --- exercises --------------------------------------------------------------------------
    def summary(ex) -> dict:
        return {"slug": ex.slug, "title": ex.title, "summary": ex.summary,
                "tiers": [t for t, files in ex.test_files().items() if files]}

    @app.get("/exercises", dependencies=AUTH, response_model=list[ExerciseSummary], tags=["exercises"], responses=_err())
    def list_exercises():
        """Every exercise served: slug, title, tiers."""
        return [ExerciseSummary(**summary(ex)) for _, ex in sorted(catalog.items())]

    @app.get("/exercises/{slug}", dependencies=AUTH, response_model=ExerciseDetail, tags=["exercises"], responses=_err(404))
    def get_exercise(slug: str):
        """The spec (Markdown), the starter, the signatures, the limits and the static previews."""
        ex = exercise_of(slug)
        folder = previews[slug]
        items = [Preview(name=n, size=s, url=f"/exercises/{slug}/previews/{n}",
                         media_type=mimetypes.guess_type(n)[0] or "application/octet-stream")
                 for n, s in list_regular_files(folder)]
        lim = ex.limits
        return ExerciseDetail(
            **summary(ex), paper=ex.paper, official=ex.official, spec=ex.spec_path.read_text(),
            starter=ex.starter_path.read_text(),
            functions=[FunctionInfo(name=f.name, signature=f.signature, returns=f.returns) for f in ex.functions],
            limits=LimitsInfo(call_seconds=lim.call_seconds, total_seconds=lim.total_seconds,
                              cpu_seconds=lim.cpu_seconds, memory_mb=lim.memory_mb),
            previews=items, previews_ready=folder.is_dir())

    @app.get("/exercises/{slug}/starter.py", dependencies=AUTH, response_class=Response, tags=["exercises"],
             responses={200: {"content": {"text/x-python": {"schema": {"type": "string"}}}}, **_err(404)})
    def get_starter(slug: str):
        """The starter source, to save as your solution file."""
        return PlainTextResponse(exercise_of(slug).starter_path.read_text(), media_type="text/x-python")

    @app.get("/exercises/{slug}/previews/{name}", dependencies=AUTH, response_class=Response, tags=["exercises"],
             responses={200: {"content": FILE_CONTENT, "description": "the file"}, **_err(404, 429, 503)})
    def get_preview(slug: str, name: str, request: Request):
        """One of the reference's T3 artifacts, streamed from disk."""
        exercise_of(slug)
        return serve_file(client(request), open_regular_file(previews[slug], name),
                          mimetypes.guess_type(name)[0] or "application/octet-stream", name,
                          f"exercise {slug} has no preview {name!r}")

    # --- operations -------------------------------------------------------------------------
    @app.get("/healthz", response_model=Health, tags=["operations"])
    def healthz():
        """The process is alive."""
        return Health()

    @app.get("/readyz", response_model=Readiness, tags=["operations"],
             responses={503: {"model": Readiness, "description": "not ready"}})
    def readyz():
        """Ready: the database answers and at least one worker's zygote is warm."""
        try:
            db_ok = store.ping()
        except Exception:  # noqa: BLE001 - that is the answer
            db_ok = False
        n_ready = pool.ready_count if pool is not None else 0
        body = Readiness(ready=db_ok and n_ready > 0, database=db_ok, workers=cfg.workers, workers_ready=n_ready)
        return body if body.ready else JSONResponse(body.model_dump(), status_code=503)

    @app.get("/metrics", response_class=Response, tags=["operations"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    def metrics():
        """Prometheus text format: queue depth, gradings by verdict, grading latency."""
        return PlainTextResponse(_metrics_text(store.metrics(), pool, transfers.in_flight),
                                 media_type="text/plain; version=0.0.4")

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            prop = schema["components"]["schemas"]["SubmitRequest"]["properties"]["exercise"]
            prop["enum"] = sorted(catalog)
            # optional parameters: absent, or a string of this form (never a JSON null)
            for path, name, pattern in (("/submissions", "cursor", SUBMISSION_ID.pattern),
                                        ("/submissions/{sid}/events", "last-event-id", LAST_EVENT_ID.pattern)):
                for param in schema["paths"][path]["get"]["parameters"]:
                    if param["name"] == name:
                        param["schema"] = {"type": "string", "pattern": pattern}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    # JSON escapes can take six bytes per byte of code; anything larger cannot be a valid submission.
    app.add_middleware(Guard, keys=cfg.api_keys, max_body=6 * cfg.max_source_bytes + 4096)
    return app


def _metrics_text(m: dict, pool: WorkerPool | None, transfers: int = 0) -> str:
    lines = ["# HELP judge_queue_depth Submissions waiting for a worker.", "# TYPE judge_queue_depth gauge",
             f"judge_queue_depth {m['by_status'].get('queued', 0)}",
             "# HELP judge_submissions Submissions in the database, by status.", "# TYPE judge_submissions gauge"]
    lines += [f'judge_submissions{{status="{s}"}} {m["by_status"].get(s, 0)}'
              for s in ("queued", "running", "done", "error")]
    lines += ["# HELP judge_gradings_total Gradings completed, by verdict.", "# TYPE judge_gradings_total counter"]
    lines += [f'judge_gradings_total{{verdict="{v}"}} {m["by_outcome"].get(v, 0)}'
              for v in ("accepted", "rejected", "error")]
    lat = m["latency"]
    lines += ["# HELP judge_grading_seconds Time from a worker taking a submission to its verdict.",
              "# TYPE judge_grading_seconds histogram"]
    lines += [f'judge_grading_seconds_bucket{{le="{b:g}"}} {c}' for b, c in lat["buckets"]]
    lines += [f'judge_grading_seconds_bucket{{le="+Inf"}} {lat["count"]}',
              f"judge_grading_seconds_sum {lat['sum']:.6f}", f"judge_grading_seconds_count {lat['count']}",
              "# HELP judge_workers_ready Grading workers with a warm sandbox.", "# TYPE judge_workers_ready gauge",
              f"judge_workers_ready {pool.ready_count if pool is not None else 0}",
              "# HELP judge_transfers_in_flight File downloads being sent.", "# TYPE judge_transfers_in_flight gauge",
              f"judge_transfers_in_flight {transfers}"]
    return "\n".join(lines) + "\n"


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
    print(f"judge: serving on {url} with {cfg.workers} worker(s); database {cfg.database_path}", flush=True)
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
