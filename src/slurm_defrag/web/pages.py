"""The page's routes: the static files and the JSON API, as read-only GET pages.

``/`` (``index.html``), ``/app.js``, ``/style.css``, and

* ``/api/snapshot`` — GPU map, summary and falsely starved jobs of the latest snapshot;
* ``/api/history?since=7d`` — fragmentation over time (``30m``, ``12h``, ``7d``, ``2w``);
* ``/api/plans?limit=20`` — the newest plans with their steps and Slurm commands;
* ``/api/impact?since=14d&change_at=mode`` — what the service did: before and after the
  switch from dry-run to enforce (or a time), with intervals (``report impact --json``).

Errors are JSON ``{"error": ...}``: 400 for a bad parameter, 404 when there is no snapshot
yet, 503 when the database cannot be read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

from slurm_defrag.errors import DefragError, InputError
from slurm_defrag.service.http import Page, Query, Response
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.timespec import parse_duration
from slurm_defrag.web.sources import Source

DEFAULT_SINCE = "7d"
DEFAULT_IMPACT_SINCE = "14d"
DEFAULT_PLANS = 20
MAX_PLANS = 200

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}


def _static(name: str, content_type: str) -> Page:
    body = resources.files("slurm_defrag.web").joinpath("static", name).read_bytes()
    response = Response(200, body, content_type)
    return lambda _: response


def _json_api(build: Callable[[Query], object]) -> Page:
    """A JSON route whose user-facing errors become statuses instead of 500s."""

    def page(query: Query) -> Response:
        try:
            return Response.json(build(query))
        except InputError as exc:
            return Response.json({"error": str(exc)}, 400)
        except NotFound as exc:
            return Response.json({"error": str(exc)}, 404)
        except DefragError as exc:  # database unreachable and the like
            return Response.json({"error": str(exc)}, 503)

    return page


def _one(query: Query, name: str, default: str) -> str:
    values = query.get(name)
    return values[-1] if values else default


_LIMIT = re.compile(r"[0-9]{1,4}", re.ASCII)


def _limit(query: Query) -> int:
    # Not str.isdigit(): it is true for "²" and "٣", which int() then refuses or reads.
    text = _one(query, "limit", str(DEFAULT_PLANS))
    if not _LIMIT.fullmatch(text) or not 1 <= int(text) <= MAX_PLANS:
        raise InputError(f"limit: {text[:40]!r} is not a number from 1 to {MAX_PLANS}")
    return int(text)


def web_pages(source: Source) -> dict[str, Page]:
    """Every route of the page, reading ``source`` at each request."""

    def snapshot(_: Query) -> object:
        key = source.latest_key()
        if key is None:
            raise NotFound(f"no snapshot yet in {source.description}")
        return {**source.snapshot(key), "origin": source.description}

    def history(query: Query) -> object:
        since = _one(query, "since", DEFAULT_SINCE)
        views = source.history(parse_duration(since))
        if views is None:
            return {"series": [], "nodes": [], "worst": [], "since_text": since,
                    "note": f"no history in a {source.description}"}  # fmt: skip
        return {**views, "since_text": since}

    def plans(query: Query) -> object:
        found = source.plans(_limit(query))
        if found is None:
            return {"plans": [], "note": f"no plans in a {source.description}"}
        return {"plans": found}

    def impact(query: Query) -> object:
        since = _one(query, "since", DEFAULT_IMPACT_SINCE)
        change = _one(query, "change_at", "mode")[:64]
        window = parse_duration(since)
        try:
            found = source.impact(window, change)
        except NotFound as exc:  # nothing to compare yet: the section says why
            return {"note": str(exc), "since_text": since}
        if found is None:
            return {"note": f"no history in a {source.description}", "since_text": since}
        return {**found, "since_text": since}

    routes = {path: _static(name, ctype) for path, (name, ctype) in _STATIC.items()}
    routes["/api/snapshot"] = _json_api(snapshot)
    routes["/api/history"] = _json_api(history)
    routes["/api/plans"] = _json_api(plans)
    routes["/api/impact"] = _json_api(impact)
    return routes
