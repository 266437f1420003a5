"""A view drawn on request: ``<view>.svg``, ``<view>.png`` and their ``-dark`` variants, drawn
from the ``<view>.vl.json`` of the same blob set (a grading's artifacts, an exercise's previews)
by the API process that is asked for it, then kept in that set for every API node
(``judge.views_render`` draws; only numbers come from the submission).
"""

from __future__ import annotations

import orjson

from judge import views_render
from judge.errors import BlobExists, BlobTooLarge
from judge.service.blobs import Blob, BlobStore, MemoryBlob


def draw(blobs: BlobStore, owner: str, name: str) -> Blob | None:
    """``name`` of ``owner``'s set, drawn from its spec if it is not kept yet; None when ``name``
    is no drawing of a view the set has. ``views_render.RenderError`` when it cannot be drawn."""
    wanted = views_render.drawable(name)
    if wanted is None:
        return None
    kept = blobs.open(owner, name)
    if kept is not None:
        return kept
    spec_name, fmt, theme = wanted
    spec = blobs.read(owner, spec_name)
    if spec is None:
        return None
    try:
        spec = orjson.loads(spec)
    except orjson.JSONDecodeError as e:
        raise views_render.RenderError(f"its spec is not JSON: {e}") from None
    data = views_render.svg(spec, theme).encode() if fmt == "svg" else views_render.png(spec, theme)
    try:
        blobs.put(owner, name, data)
    except BlobExists:  # another request (on any node) drew it first: the same picture, kept
        pass
    except BlobTooLarge:  # its set is full: served, not kept
        return MemoryBlob(data)
    return blobs.open(owner, name) or MemoryBlob(data)
