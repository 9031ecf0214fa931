"""The run inspector as an ASGI app: server-rendered pages over any `Store`, a little
JavaScript for the diagram, live updates and decisions.

Safe by default: requests whose `Host` is not the address it serves are refused (DNS
rebinding); decisions and forks are POSTs that need the token (header
`X-Statechart-Token`) and a same-origin `Origin`; every stored text is escaped by the
templates; scripts come only from the package (`Content-Security-Policy`).
"""

from __future__ import annotations

import hmac
import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from statechart.errors import RunNotFoundError, StatechartError
from statechart.records.run import Status
from statechart.runtime.decisions import approve, cancel, reject
from statechart.runtime.lineage import fork
from statechart.store.base import Store
from statechart.ui.views import Charts, context_at, pretty, run_page

HERE = Path(__file__).parent
PAGE_SIZE = 50
STATUSES: tuple[Status, ...] = ("running", "waiting", "ended")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


class Guard(BaseHTTPMiddleware):
    """Refuse a foreign `Host`; POSTs need the token and a same-origin `Origin`."""

    def __init__(self, app: Any, *, hosts: set[str], token: str) -> None:
        super().__init__(app)
        self.hosts, self.token = hosts, token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host", "")
        if host not in self.hosts:
            return PlainTextResponse(f"refused: Host {host!r} is not this inspector", 421)
        if request.method == "POST":
            origin = request.headers.get("origin")
            if origin is not None and origin not in {f"http://{h}" for h in self.hosts}:
                return JSONResponse({"error": f"refused: a cross-site request from {origin}"}, 403)
            if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
                return JSONResponse({"error": "refused: a cross-site request"}, 403)
            given = request.headers.get("x-statechart-token", "")
            if not hmac.compare_digest(given, self.token):
                return JSONResponse(
                    {
                        "error": "refused: the token is missing or wrong (see the line "
                        "`statechart ui` printed)"
                    },
                    403,
                )
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def create_app(
    store: Store,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 8765,
    agents: Path | None = None,
    trace_url: str | None = None,
) -> Starlette:
    """The inspector over `store`, answering only to `host:port` (and `localhost:port`
    when bound to the loopback address)."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["pretty"] = pretty
    env.filters["when"] = lambda t: (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""
    )
    charts = Charts(agents)
    hosts = {f"{host}:{port}"}
    if host in ("127.0.0.1", "localhost", "::1"):
        hosts |= {f"127.0.0.1:{port}", f"localhost:{port}"}

    def page(name: str, **values: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**values))

    async def runs(request: Request) -> HTMLResponse:
        q = request.query_params
        status = q.get("status") if q.get("status") in STATUSES else None
        chart = q.get("chart") or None
        search = q.get("q") or None
        number = max(int(q.get("page", "1") or 1), 1) if q.get("page", "1").isdigit() else 1
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
        run_id = request.path_params["run_id"]
        try:
            data = await run_page(store, charts, run_id, trace_url)
        except RunNotFoundError as exc:
            return page("missing.html", message=str(exc))
        return page("run.html", d=data, run=data.run)

    async def seq(request: Request) -> JSONResponse:
        loaded = await store.load(request.path_params["run_id"])
        return JSONResponse({"seq": loaded.seq, "status": loaded.snapshot.status})

    async def transcript(request: Request) -> HTMLResponse:
        run_id, visit = request.path_params["run_id"], int(request.path_params["visit"])
        messages = await store.transcript(run_id, visit)
        return page("transcript.html", messages=messages)

    async def context(request: Request) -> HTMLResponse:
        run_id, at = request.path_params["run_id"], int(request.path_params["seq"])
        chart, why = await charts.of(store, (await store.load(run_id)).snapshot)
        if chart is None:
            return page("context.html", why=why, found=None)
        return page("context.html", why=None, found=await context_at(store, chart, run_id, at))

    async def decide(request: Request) -> JSONResponse:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        body = await request.json()
        by = str(body.get("by") or "").strip()
        loaded = await store.load(run_id)
        chart, why = await charts.of(store, loaded.snapshot)
        if chart is None:
            return JSONResponse({"error": f"no decision here: {why}"}, 409)
        try:
            if action == "fork":
                child = await fork(chart, run_id, int(body["at"]), store=store, now=time.time())
                return JSONResponse({"ok": True, "run_id": child.run_id})
            if not by:
                return JSONResponse({"error": "say who decides (your name)"}, 400)
            if action == "approve":
                edits = body.get("edits")
                await approve(
                    chart, run_id, store=store, by=by, note=body.get("note", ""), edits=edits
                )
            elif action == "reject":
                await reject(chart, run_id, store=store, by=by, reason=str(body.get("reason", "")))
            elif action == "cancel":
                await cancel(chart, run_id, store=store, by=by, reason=str(body.get("reason", "")))
            else:
                return JSONResponse({"error": f"no action {action!r}"}, 404)
        except StatechartError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/", runs),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/runs/{run_id}", one),
            Route("/runs/{run_id}/seq", seq),
            Route("/runs/{run_id}/transcript/{visit:int}", transcript),
            Route("/runs/{run_id}/context/{seq:int}", context),
            Route("/runs/{run_id}/{action}", decide, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(Guard, hosts=hosts, token=token)],
    )
