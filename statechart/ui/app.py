"""The run inspector as an ASGI app: server-rendered pages over any `Store`, a little
JavaScript for the diagram, live updates and decisions.

Safe by default: requests whose `Host` is not the address it serves are refused (DNS
rebinding); decisions and forks are POSTs that need the token (header
`X-Statechart-Token`) and a same-origin request; a decision names the step and the call
the person saw, so it never lands on another; every stored text is escaped by the
templates; scripts come only from the package (`Content-Security-Policy`).
"""

from __future__ import annotations

import hmac
import json
import re
import shlex
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from statechart.engine.timers import clock_time
from statechart.errors import RunNotFoundError, StatechartError
from statechart.records.run import Status
from statechart.runtime.decisions import approve, cancel, reject
from statechart.runtime.lineage import fork, region_transcript, transcript_of
from statechart.runtime.relay import listening
from statechart.store.base import Store
from statechart.store.postgres import PostgresStore
from statechart.ui.views import (
    Charts,
    badge_of,
    context_at,
    current_call,
    pretty,
    run_page,
    shown_reason,
)

HERE = Path(__file__).parent
PAGE_SIZE = 50
KEEPALIVE = 15.0
"""Seconds between comments on a quiet event stream (proxies close idle ones)."""
STATUSES: tuple[Status, ...] = ("running", "waiting", "sleeping", "ended")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def allowed_hosts(host: str, port: int) -> set[str]:
    """The `Host` headers a browser sends for this address (an IPv6 one in brackets; no
    port for port 80), and `localhost`/`127.0.0.1` too when it is the loopback address."""
    names = {host.lower()} | (set(LOOPBACK) if host in LOOPBACK else set())
    out = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        out.add(f"{shown}:{port}")
        if port == 80:
            out.add(shown)
    return out


class Guard(BaseHTTPMiddleware):
    """Refuse a foreign `Host`; POSTs need the token and a same-origin request."""

    def __init__(self, app: Any, *, hosts: set[str], token: str) -> None:
        super().__init__(app)
        self.hosts, self.token = hosts, token.encode()

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._checked(request, call_next)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    async def _checked(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            return PlainTextResponse(f"refused: Host {host!r} is not this inspector", 421)
        if request.method == "POST":
            origin = request.headers.get("origin")
            if origin is not None and origin.lower() not in {f"http://{h}" for h in self.hosts}:
                return JSONResponse({"error": f"refused: a cross-site request from {origin}"}, 403)
            if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
                return JSONResponse({"error": "refused: a cross-site request"}, 403)
            given = request.headers.get("x-statechart-token", "").encode()
            if not hmac.compare_digest(given, self.token):
                return JSONResponse(
                    {
                        "error": "refused: the token is missing or wrong (open the link "
                        "`statechart ui` printed)"
                    },
                    403,
                )
        return await call_next(request)


def create_app(
    store: Store,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 8765,
    agents: Path | None = None,
    trace_url: str | None = None,
    db: str | None = None,
) -> Starlette:
    """The inspector over `store`, answering only to `host:port` (and `localhost:port`
    when bound to the loopback address)."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["pretty"] = pretty
    env.filters["reason"] = shown_reason
    env.filters["badge"] = lambda row: badge_of(None, row)
    env.filters["path"] = lambda value: quote(str(value), safe="")  # as encodeURIComponent
    env.filters["clock"] = clock_time
    env.filters["when"] = lambda t: (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""
    )
    charts = Charts(agents)

    def page(name: str, code: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**values), status_code=code)

    async def runs(request: Request) -> HTMLResponse:
        q = request.query_params
        status = q.get("status") if q.get("status") in STATUSES else None
        chart = q.get("chart") or None
        search = q.get("q") or None
        given = q.get("page", "1")
        number = int(given) if re.fullmatch(r"[0-9]{1,6}", given) and int(given) > 0 else 1
        found = await store.page(
            status=status,  # type: ignore[arg-type]
            chart=chart,
            search=search,
            limit=PAGE_SIZE,
            offset=(number - 1) * PAGE_SIZE,
        )
        pages = max(1, -(-found.total // PAGE_SIZE))
        return page(
            "runs.html",
            rows=found.rows,
            total=found.total,
            number=number,
            pages=pages,
            status=status or "",
            chart=chart or "",
            search=search or "",
            statuses=STATUSES,
        )

    async def one(request: Request) -> Response:
        try:
            data = await run_page(store, charts, request.path_params["run_id"], trace_url)
        except RunNotFoundError as exc:
            return page("missing.html", code=404, message=str(exc))
        return page("run.html", d=data, run=data.run, continues=continues(data.run.run_id))

    def continues(run_id: str) -> str:
        """Who goes on with a run a person decided on, that nothing may be driving."""
        if isinstance(store, PostgresStore):
            return "A `statechart worker` on this database continues it (none may be running)."
        where = f" --db {shlex.quote(db)}" if db else ""
        return (
            "Nothing drives this run from this page: "
            f"`statechart resume {shlex.quote(run_id)}{where}` continues it."
        )

    async def seq(request: Request) -> JSONResponse:
        try:
            loaded = await store.load(request.path_params["run_id"])
        except RunNotFoundError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        return JSONResponse({"seq": loaded.seq, "status": loaded.snapshot.status})

    async def live(request: Request) -> StreamingResponse:
        """Server-sent events: the text a run's current call is streaming, and a `stored`
        event as each step is stored, from whichever process on this machine drives it."""
        run_id = request.path_params["run_id"]

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            async with listening(store, quiet=KEEPALIVE) as messages:
                async for message in messages:
                    if message is None:
                        yield ": keepalive\n\n"
                    elif message.get("run_id") == run_id:
                        kind = str(message.get("kind", "call"))
                        yield f"event: {kind}\ndata: {json.dumps(message)}\n\n"

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def transcript(request: Request) -> Response:
        run_id, visit = request.path_params["run_id"], int(request.path_params["visit"])
        try:
            run = (await store.load(run_id)).snapshot
            region = request.query_params.get("region")
            messages = (
                await region_transcript(store, run, visit, region)
                if region
                else await transcript_of(store, run, visit)
            )
        except (RunNotFoundError, OverflowError) as exc:
            return page("missing.html", code=404, message=str(exc))
        return page("transcript.html", messages=messages)

    async def context(request: Request) -> Response:
        run_id, at = request.path_params["run_id"], int(request.path_params["seq"])
        try:
            found, why = await context_at(store, charts, run_id, at)
        except (RunNotFoundError, OverflowError) as exc:
            return page("missing.html", code=404, message=str(exc))
        return page("context.html", why=why, found=found)

    async def decide(request: Request) -> JSONResponse:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "send a JSON object"}, 400)
        try:
            loaded = await store.load(run_id)
        except RunNotFoundError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        chart, why = await charts.of(store, loaded.snapshot)
        if chart is None:
            return JSONResponse({"error": f"no decision here: {why}"}, 409)
        try:
            if action == "fork":
                at = body.get("at")
                if not isinstance(at, int) or isinstance(at, bool):
                    return JSONResponse({"error": "say after which step (`at`, a number)"}, 400)
                child = await fork(chart, run_id, at, store=store, now=time.time())
                return JSONResponse({"ok": True, "run_id": child.run_id})
            by = str(body.get("by") or "").strip()
            if not by:
                return JSONResponse({"error": "say who decides (your name)"}, 400)
            if action != "cancel" and body.get("seq") != loaded.seq:  # an older page
                return JSONResponse(
                    {"error": f"run {run_id} moved on (now at step {loaded.seq}); look again"},
                    409,
                )
            reason = str(body.get("reason") or "")
            if action == "approve":
                if body.get("call") != current_call(loaded.snapshot):
                    return JSONResponse(
                        {"error": f"run {run_id} no longer waits on that call; look again"}, 409
                    )
                edits = body.get("edits")
                if edits is not None and not isinstance(edits, dict):
                    return JSONResponse({"error": "edits must be a JSON object"}, 400)
                note = str(body.get("note") or "")
                await approve(chart, run_id, store=store, by=by, note=note, edits=edits)
            elif action == "reject":
                await reject(chart, run_id, store=store, by=by, reason=reason)
            elif action == "cancel":
                await cancel(chart, run_id, store=store, by=by, reason=reason)
            else:
                return JSONResponse({"error": f"no action {action!r}"}, 404)
        except StatechartError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/", runs),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/runs/{run_id:path}", one),
            Route("/seq/{run_id:path}", seq),
            Route("/live/{run_id:path}", live),
            Route("/transcript/{visit:int}/{run_id:path}", transcript),
            Route("/context/{seq:int}/{run_id:path}", context),
            Route("/decide/{action}/{run_id:path}", decide, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(Guard, hosts=allowed_hosts(host, port), token=token)],
    )
