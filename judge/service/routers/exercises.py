"""The exercises router: the list, one exercise (spec, starter, signatures, limits, previews),
its starter file and its reference's T3 previews."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from judge import views_render
from judge.service.files import list_regular_files, open_regular_file
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
        folder = s.previews[slug]
        items = [Preview(name=n, size=size, url=f"/exercises/{slug}/previews/{n}",
                         media_type=mimetypes.guess_type(n)[0] or "application/octet-stream")
                 for n, size in list_regular_files(folder)]
        lim = ex.limits
        return ExerciseDetail(
            **summary(ex), paper=ex.paper, official=ex.official, spec=ex.spec_path.read_text(),
            starter=ex.starter_path.read_text(),
            functions=[FunctionInfo(name=f.name, signature=f.signature, returns=f.returns) for f in ex.functions],
            limits=LimitsInfo(call_seconds=lim.call_seconds, total_seconds=lim.total_seconds,
                              cpu_seconds=lim.cpu_seconds, memory_mb=lim.memory_mb),
            previews=items, previews_ready=folder.is_dir())

    @r.get("/exercises/{slug}/starter.py", dependencies=AUTH, response_class=Response, tags=["exercises"],
           responses={200: {"content": {"text/x-python": {"schema": {"type": "string"}}}}, **errors(404)})
    def get_starter(slug: str):
        """The starter source, to save as your solution file."""
        return PlainTextResponse(s.exercise_of(slug).starter_path.read_text(), media_type="text/x-python")

    @r.get("/exercises/{slug}/previews/{name}", dependencies=AUTH, response_class=Response, tags=["exercises"],
           responses={200: {"content": FILE_CONTENT, "description": "the file"}, **errors(404, 429, 503)})
    def get_preview(slug: str, name: str, request: Request):
        """One of the reference's T3 artifacts, streamed from disk (a view's SVG or PNG is drawn
        from its spec when first asked for, then kept)."""
        s.exercise_of(slug)
        opened = open_regular_file(s.previews[slug], name)
        if opened is None and views_render.drawable(name) is not None and s.previews[slug].is_dir():
            try:
                if views_render.artifact_for(s.previews[slug], name) is not None:
                    opened = open_regular_file(s.previews[slug], name)
            except views_render.RenderError:
                opened = None
        return s.serve_file(s.client(request), opened,
                          mimetypes.guess_type(name)[0] or "application/octet-stream", name,
                          f"exercise {slug} has no preview {name!r}")

    return r
