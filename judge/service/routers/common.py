"""What the service's routers share: the service's parts (``Service``: the store, the catalog,
the workers, the caps), the helpers every route uses (its client, a submission it owns, an exercise
by slug, a file within the transfer caps), the OpenAPI bits and the submission document."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from fastapi import Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPBearer

from judge.exercise import Exercise
from judge.models import Verdict
from judge.service.config import Config
from judge.service.blobs import Blob, BlobStore
from judge.service.files import BlobStream, Transfers
from judge.service.guard import SUBMISSION_ID, ApiError, Changes, RateLimiter
from judge.service.pool import WorkerPool
from judge.service.schemas import ErrorBody, Submission
from judge.service.store import Store
from judge.tuning import INLINE_DOCUMENT_BYTES  # a larger verdict is parsed and serialized off the event loop

bearer = HTTPBearer(auto_error=False, description="an API key from JUDGE_API_KEYS")
AUTH = [Security(bearer)]  # declares the scheme in the OpenAPI document; Guard enforces it
FILE_CONTENT = {t: {"schema": {"type": "string", "format": "binary"}} for t in
                ("image/png", "image/svg+xml", "text/csv", "text/plain", "application/octet-stream")}
FILE_CONTENT["application/json"] = {"schema": {}}


@dataclass
class Service:
    """One service's parts, built once by ``create_app`` and shared by its routers."""

    cfg: Config  # the service's settings
    store: Store  # submissions and their events (all SQL)
    catalog: dict[str, Exercise]  # the exercises served, by slug
    previews: dict[str, str]  # slug -> the blob set of its reference's T3 artifacts (catalog.previews_of)
    blobs: BlobStore  # artifacts and previews: files under the data dir, or PostgreSQL's (judge.service.blobs)
    limiter: RateLimiter  # submissions per client per minute
    transfers: Transfers  # file downloads in flight, per client and in all
    pool: WorkerPool | None  # the grading workers (None with workers = 0)
    changes: Changes  # wakes whoever waits for a submission when it changes

    @staticmethod
    def client(request: Request) -> str:
        return request.state.client  # set by Guard, which already refused anyone else

    def owned(self, request: Request, sid: str) -> dict:
        row = self.store.get(sid, self.client(request)) if SUBMISSION_ID.match(sid) else None
        if row is None:
            raise ApiError(404, "not_found", f"no submission {sid!r}")
        return row

    def exercise_of(self, slug: str):
        ex = self.catalog.get(slug)
        if ex is None:
            raise ApiError(404, "unknown_exercise", f"unknown exercise {slug!r}; expected one of: "
                           f"{', '.join(sorted(self.catalog)) or 'none'}")
        return ex

    async def wait_done(self, sid: str, timeout: float) -> bool:
        """True once ``sid`` is done or failed, False if not within ``timeout`` seconds (only its
        status is read meanwhile, in the event loop: a tiny row)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.store.status(sid) in ("done", "error"):
                return True
            if not await self.changes.wait(sid, deadline - time.monotonic()):
                return self.store.status(sid) in ("done", "error")

    def serve_file(self, who: str, blob: Blob | None, media_type: str, name: str,
                   missing: str) -> BlobStream:
        """Stream an open blob (``BlobStore.open``), within the caps on transfers."""
        if blob is None:
            raise ApiError(404, "not_found", missing)
        refused = self.transfers.take(who)
        if refused is not None:
            blob.close()
            if refused == "client":
                raise ApiError(429, "too_many_transfers", f"at most {self.cfg.client_transfers} downloads "
                               "of one client at once; finish one first", {"Retry-After": "1"})
            raise ApiError(503, "transfers_busy", f"the server is sending {self.cfg.max_transfers} files "
                           "already; try again shortly", {"Retry-After": "1"})
        return BlobStream(blob, media_type, name, done=lambda: self.transfers.release(who))


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of a route's errors (401 always: every route but /healthz needs a key)."""
    return {c: {"model": ErrorBody} for c in (401, *codes)}


def timestamp(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc)


def document(row: dict) -> Submission:
    sid = row["id"]
    return Submission(
        id=sid, exercise=row["exercise"], mode=row["mode"], status=row["status"],
        attempts=row["attempts"], created_at=timestamp(row["created_at"]), started_at=timestamp(row["started_at"]),
        finished_at=timestamp(row["finished_at"]), message=row["message"],
        verdict=Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None,
        links={"self": f"/submissions/{sid}", "events": f"/submissions/{sid}/events"})


def document_json(row: dict) -> str:
    return document(row).model_dump_json()


async def document_off_loop(row: dict) -> str:
    """The whole document as JSON: built in a worker thread when its verdict is large."""
    if len(row["verdict"] or "") > INLINE_DOCUMENT_BYTES:
        return await run_in_threadpool(document_json, row)
    return document_json(row)
