"""The operations router: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from judge.service.pool import WorkerPool
from judge.service.routers.common import Service
from judge.service.schemas import Health, Readiness


def router(s: Service) -> APIRouter:
    r = APIRouter()
    @r.get("/healthz", response_model=Health, tags=["operations"])
    def healthz():
        """The process is alive."""
        return Health()

    @r.get("/readyz", response_model=Readiness, tags=["operations"],
           responses={503: {"model": Readiness, "description": "not ready"}})
    def readyz():
        """Ready: the database answers and at least one worker's zygote is warm."""
        try:
            db_ok = s.store.ping()
        except Exception:  # noqa: BLE001 - that is the answer
            db_ok = False
        n_ready = s.pool.ready_count if s.pool is not None else 0
        body = Readiness(ready=db_ok and n_ready > 0, database=db_ok, workers=s.cfg.workers, workers_ready=n_ready)
        return body if body.ready else JSONResponse(body.model_dump(), status_code=503)

    @r.get("/metrics", response_class=Response, tags=["operations"],
           responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    def metrics():
        """Prometheus text format: queue depth, gradings by verdict, grading latency."""
        return PlainTextResponse(metrics_text(s.store.metrics(), s.pool, s.transfers.in_flight),
                                 media_type="text/plain; version=0.0.4")

    return r


def metrics_text(m: dict, pool: WorkerPool | None, transfers: int = 0) -> str:
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
