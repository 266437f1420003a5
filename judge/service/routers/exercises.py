"""The exercises router: the list, one exercise (spec, starter, signatures, limits, previews),
its starter file and its reference's T3 previews."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from judge import views_render
from judge.service.drawings import draw
from judge.service.routers.common import AUTH, FILE_CONTENT, Service, errors
from judge.service.schemas import ExerciseDetail, ExerciseSummary, FunctionInfo, LimitsInfo, Preview


def summary(ex) -> dict:
    return {"slug": ex.slug, "title": ex.title, "summary": ex.summary,
            "tiers": [t for t, files in ex.test_files().items() if files]}


def router(s: Service) -> APIRouter:
    r = APIRouter()
    @r.get("/exercises", dependencies=AUTH, response_model=list[ExerciseSummary], tags=["exercises"], responses=errors())
    def list_exercises():
        """Every exercise served: slug, title, tiers."""
        return [ExerciseSummary(**summary(ex)) for _, ex in sorted(s.catalog.items())]

    @r.get("/exercises/{slug}", dependencies=AUTH, response_model=ExerciseDetail, tags=["exercises"], responses=errors(404))
    def get_exercise(slug: str):
        """The spec (Markdown), the starter, the signatures, the limits and the static previews."""
        ex = s.exercise_of(slug)
        listed = s.blobs.list(s.previews[slug])  # None until some host has built them
        items = [Preview(name=n, size=size, url=f"/exercises/{slug}/previews/{n}",
                         media_type=mimetypes.guess_type(n)[0] or "application/octet-stream")
                 for n, size in listed or ()]
        lim = ex.limits
        return ExerciseDetail(
            **summary(ex), paper=ex.paper, official=ex.official, spec=ex.spec_path.read_text(),
            starter=ex.starter_path.read_text(),
            functions=[FunctionInfo(name=f.name, signature=f.signature, returns=f.returns) for f in ex.functions],
            limits=LimitsInfo(call_seconds=lim.call_seconds, total_seconds=lim.total_seconds,
                              cpu_seconds=lim.cpu_seconds, memory_mb=lim.memory_mb),
            previews=items, previews_ready=listed is not None)

    @r.get("/exercises/{slug}/starter.py", dependencies=AUTH, response_class=Response, tags=["exercises"],
           responses={200: {"content": {"text/x-python": {"schema": {"type": "string"}}}}, **errors(404)})
    def get_starter(slug: str):
        """The starter source, to save as your solution file."""
        return PlainTextResponse(s.exercise_of(slug).starter_path.read_text(), media_type="text/x-python")

    @r.get("/exercises/{slug}/previews/{name}", dependencies=AUTH, response_class=Response, tags=["exercises"],
           responses={200: {"content": FILE_CONTENT, "description": "the file"}, **errors(404, 429, 503)})
    def get_preview(slug: str, name: str, request: Request):
        """One of the reference's T3 artifacts, streamed from the blob store (a view's SVG or PNG
        is drawn from its spec when first asked for, then kept)."""
        s.exercise_of(slug)
        blob = s.blobs.open(s.previews[slug], name)
        if blob is None and views_render.drawable(name) is not None:
            try:
                blob = draw(s.blobs, s.previews[slug], name)
            except views_render.RenderError:
                blob = None
        return s.serve_file(s.client(request), blob,
                          mimetypes.guess_type(name)[0] or "application/octet-stream", name,
                          f"exercise {slug} has no preview {name!r}")

    return r
