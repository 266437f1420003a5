"""The submissions router: submit, list, one submission, its artifacts, its event stream."""

from __future__ import annotations

import re
import time

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from judge import views_render
from judge.models import Artifact, Verdict
from judge.service.blobs import artifacts_owner
from judge.service.drawings import draw
from judge.service.guard import SUBMISSION_ID, ApiError
from judge.service.routers import common
from judge.service.routers.common import AUTH, FILE_CONTENT, Service, errors, timestamp
from judge.service.schemas import Accepted, Submission, SubmissionPage, SubmissionSummary, SubmitRequest
from judge.service.store import QueueFull

SSE_MAX_SECONDS = 600.0
SSE_KEEPALIVE = 15.0  # seconds of silence before a stream sends a comment (proxies close idle ones)
LAST_EVENT_ID = re.compile(r"^[0-9]{1,9}$")
ARTIFACT_WAIT = 30.0  # seconds an artifact request waits for plots still being drawn
SSE_EVENT = {"type": "object", "description": "one server-sent event (OpenAPI 3.1: the schema of each event)",
             "properties": {"id": {"type": "string"}, "event": {"type": "string", "enum": ["status", "test", "end"]},
                            "data": {"type": "string", "description": "JSON: a status change, a test result "
                                     "(tier, name, status, message…), or at the end the whole document"}},
             "required": ["event", "data"]}




def _drawn(blobs, sid: str, name: str, missing: str):
    """(an Artifact for ``name``, a view of the submission's artifacts drawn as SVG or PNG by
    this process and kept with them, or None; its open blob; the message when there is none)."""
    try:
        blob = draw(blobs, artifacts_owner(sid), name)
    except views_render.RenderError as e:
        return None, None, f"{name!r} could not be drawn: {e.message}"
    if blob is None:
        return None, None, missing
    return Artifact(name=name, path=f"/submissions/{sid}/artifacts/{name}", size=blob.size,
                    media_type="image/svg+xml" if name.endswith(".svg") else "image/png"), blob, missing


def router(s: Service) -> APIRouter:
    r = APIRouter()
    @r.post("/submit", dependencies=AUTH, status_code=202, response_model=Accepted, tags=["submissions"],
            responses={200: {"model": Submission, "description": "graded within ?wait="},
                       202: {"headers": {"Location": {"schema": {"type": "string"},
                                                      "description": "the submission's URL"}}},
                       **errors(400, 413, 422, 429, 503)})
    async def submit(body: SubmitRequest, request: Request, response: Response,
                     wait: float | None = Query(None, ge=0, le=60, description="seconds to wait for the verdict")):
        """Queue a submission. With ``?wait=``, answer 200 with the whole document if it is graded in time."""
        who = s.client(request)
        if body.exercise not in s.catalog:
            raise ApiError(422, "unknown_exercise", f"unknown exercise {body.exercise!r}; expected one of: "
                           f"{', '.join(sorted(s.catalog)) or 'none'}")
        try:
            size = len(body.code.encode("utf-8"))
        except UnicodeEncodeError:
            raise ApiError(422, "not_utf8", "code is not valid UTF-8 text (it holds a lone surrogate)") from None
        if size > s.cfg.max_source_bytes:
            raise ApiError(413, "code_too_large", f"code is {size} bytes; a submission is at most "
                           f"{s.cfg.max_source_bytes} bytes of UTF-8")
        if "\x00" in body.code:
            raise ApiError(422, "invalid_code", "code contains a NUL character; Python source cannot")
        retry = s.limiter.take(who)
        if retry:
            raise ApiError(429, "rate_limited", f"at most {s.cfg.rate_limit:g} submissions a minute",
                           {"Retry-After": str(max(1, round(retry + 0.5)))})
        try:
            sid = await run_in_threadpool(s.store.add, who, body.exercise, body.mode, body.code,
                                          queue_max=s.cfg.queue_max, client_max=s.cfg.client_queue_max)
        except QueueFull as e:
            if e.scope == "client":
                raise ApiError(429, "client_queue_full", f"you have {e.limit} submissions queued or "
                               "running already; wait for some to be graded", {"Retry-After": "5"}) from None
            raise ApiError(503, "queue_full", "the grading queue is full; try again shortly",
                           {"Retry-After": "5"}) from None
        if s.pool is not None:
            s.pool.notify()
        location = f"/submissions/{sid}"
        if wait and await s.wait_done(sid, min(wait, s.cfg.wait_max)):
            doc = await common.document_off_loop(s.store.get(sid, None))
            return Response(doc, status_code=200, media_type="application/json",
                            headers={"Location": location})
        response.headers["Location"] = location
        return Accepted(id=sid, status="queued")

    @r.get("/submissions", dependencies=AUTH, response_model=SubmissionPage, tags=["submissions"],
           responses=errors(400, 422))
    def list_submissions(request: Request, limit: int = Query(20, ge=1, le=100),
                         cursor: str | None = Query(None, description=(
                             "next_cursor of the previous page (opaque: it names a position in "
                             "your own list, nothing else); any other value is a 400"),
                             json_schema_extra={"pattern": SUBMISSION_ID.pattern})):  # enforced below: 400
        """The caller's own submissions, newest first."""
        if cursor is not None and not SUBMISSION_ID.match(cursor):
            raise ApiError(400, "bad_cursor", "cursor is not one this server gave you: pass next_cursor "
                           "of the previous page unchanged")
        rows = s.store.list(s.client(request), limit=limit, after=cursor)
        if rows is None:
            raise ApiError(400, "bad_cursor", "cursor is not a position in your list of submissions: "
                           "pass next_cursor of the previous page unchanged")
        items = [SubmissionSummary(id=r["id"], exercise=r["exercise"], mode=r["mode"], status=r["status"],
                                   verdict=r["outcome"], created_at=timestamp(r["created_at"]),
                                   finished_at=timestamp(r["finished_at"])) for r in rows]
        return SubmissionPage(items=items, next_cursor=rows[-1]["id"] if len(rows) == limit else None)

    @r.get("/submissions/{sid}", dependencies=AUTH, response_model=Submission, tags=["submissions"], responses=errors(404))
    def get_submission(sid: str, request: Request):
        """A submission's status and, once graded, its verdict."""
        # built here, in the route's worker thread, not by FastAPI in the event loop
        return Response(common.document_json(s.owned(request, sid)), media_type="application/json")

    def listed_artifact(request: Request, sid: str, name: str):
        """(the artifact ``name`` of the verdict or None, whether its plots are still pending)."""
        row = s.owned(request, sid)
        verdict = Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None
        if verdict is None:
            return None, False
        return next((a for a in verdict.artifacts if a.name == name), None), verdict.artifacts_pending

    @r.get("/submissions/{sid}/artifacts/{name}", dependencies=AUTH, response_class=Response, tags=["submissions"],
           responses={200: {"content": FILE_CONTENT, "description": "the file"}, **errors(400, 404, 429, 503)})
    async def get_artifact(sid: str, name: str, request: Request):
        """A file the submission's experiment wrote (metrics.json, a view's Vega-Lite spec
        ``<view>.vl.json``), with its media type, streamed from the blob store (the data dir or
        PostgreSQL: any API node serves any worker's); ``<view>.svg``,
        ``<view>.png`` and their ``-dark`` variants are drawn from the spec when first asked
        for, then kept. The artifacts are written just after the verdict: while they are pending
        this waits for them. 429 or 503 when too many downloads are in flight (the client's or all)."""
        with s.changes.watch(sid) as changed:  # before the read: a change during it is kept
            art, pending = await run_in_threadpool(listed_artifact, request, sid, name)
            deadline = time.monotonic() + ARTIFACT_WAIT
            while pending and time.monotonic() < deadline:
                await changed.wait(deadline - time.monotonic())
                art, pending = await run_in_threadpool(listed_artifact, request, sid, name)
        missing = f"submission {sid} has no artifact {name!r}"
        blob = None
        if art is None and views_render.drawable(name) is not None:  # a view drawn on request, then kept
            spec, _ = await run_in_threadpool(listed_artifact, request, sid, views_render.drawable(name)[0])
            if spec is not None:
                art, blob, missing = await run_in_threadpool(_drawn, s.blobs, sid, name, missing)
        elif art is not None:
            blob = await run_in_threadpool(s.blobs.open, artifacts_owner(sid), name)
        return s.serve_file(s.client(request), blob, art.media_type if art else "", name, missing)

    @r.get("/submissions/{sid}/events", dependencies=AUTH, response_class=Response, tags=["submissions"],
           responses={200: {"content": {"text/event-stream": {"schema": SSE_EVENT}},
                            "description": "server-sent events: status, test, and a final end"},
                      **errors(400, 404)})
    async def get_events(sid: str, request: Request, last_event_id: str | None = Header(
            None, description="resume after this event (the id of the last one received; past "
            "the last event sent: from the end); anything but a number is a 400",
            json_schema_extra={"pattern": LAST_EVENT_ID.pattern})):  # enforced below: 400
        """Tier progress as server-sent events; the last one (``end``) carries the whole document.
        Events are numbered 1, 2, … within the submission's stream (its ids)."""
        s.owned(request, sid)
        number = 0  # how many of this submission's events the s.client has
        if last_event_id is not None:
            if not LAST_EVENT_ID.match(last_event_id):
                raise ApiError(400, "bad_last_event_id", "Last-Event-ID must be the id of an event "
                               f"of this stream (1, 2, …), got {last_event_id[:40]!r}")
            number = int(last_event_id)
        after, number = s.store.resume_point(sid, number)  # the events table's id to resume after

        async def stream():
            deadline = time.monotonic() + SSE_MAX_SECONDS
            nonlocal after, number
            # watched from before the first read: a change committed while this stream is
            # suspended sending (a slow client) is kept, and the next wait returns at once
            with s.changes.watch(sid, events=True) as changed:
                while time.monotonic() < deadline:
                    status = s.store.status(sid)
                    for e in s.store.events(sid, after):
                        after, number = e["id"], number + 1
                        yield f"id: {number}\nevent: {e['kind']}\ndata: {e['data']}\n\n"
                    if status in ("done", "error"):
                        doc = await common.document_off_loop(s.store.get(sid, None))
                        yield f"event: end\ndata: {doc}\n\n"
                        return
                    if not await changed.wait(min(SSE_KEEPALIVE, deadline - time.monotonic())):
                        yield ": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return r
