"""`statechart mine` and `statechart drift`: the mining tools on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from statechart.cli.app import _close, _existing, _run, app

__all__ = ["app", "drift_command", "mine_command"]
from statechart.errors import LoadError
from statechart.mining.drift import DEFAULT_ALPHA, drift
from statechart.mining.matrix import (
    DEFAULT_REPEAT_LIMIT,
    DEFAULT_THRESHOLD,
    mine,
    state_visits,
)
from statechart.mining.propose import propose
from statechart.mining.render import (
    drift_json,
    drift_report,
    mined_json,
    mined_mermaid,
    mined_report,
    shadow_json,
    shadow_report,
)
from statechart.mining.shadow import shadow_refusals
from statechart.mining.traces import Trace, read_jsonl, read_store

SQLITE_MAGIC = b"SQLite format 3\x00"
By = Annotated[str, typer.Option("--by", help="Label steps by 'label' (tool:outcome) or 'tool'.")]


AsJson = Annotated[bool, typer.Option("--json", help="Print the same facts as one JSON document.")]


def _echo_json(doc: dict[str, Any]) -> None:
    typer.echo(json.dumps(doc, indent=2, allow_nan=False))


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


async def _traces(path: Path, chart: str | None = None, *, db: bool = False) -> list[Trace]:
    """Runs from a JSONL trace file, or from a statechart SQLite store (`db`: must be one)."""
    if db and path.is_file() and not _is_sqlite(path):
        raise LoadError(f"{path} is not a SQLite store; pass a JSONL trace file without --db")
    if db or _is_sqlite(path):
        store = _existing(str(path))
        try:
            return await read_store(store, chart=chart)
        finally:
            await _close(store)
    if not path.is_file():
        raise LoadError(
            f"no trace file at {path}; give a JSONL file (one run per line) or --db PATH"
        )
    return read_jsonl(path)


@app.command("mine")
def mine_command(
    file: Annotated[Path | None, typer.Argument(help="JSONL traces, one run per line.")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Mine a store's runs.")] = None,
    chart: Annotated[str | None, typer.Option("--chart", help="Only runs of this chart.")] = None,
    by: By = "label",
    threshold: Annotated[float, typer.Option(help="Rare below this share.")] = DEFAULT_THRESHOLD,
    repeat_limit: Annotated[
        int, typer.Option("--repeat-limit", help="Flag runs where a tool repeats more than this.")
    ] = DEFAULT_REPEAT_LIMIT,
    top: Annotated[
        int, typer.Option(help="Transitions shown in the table (0: all; --json has all).")
    ] = 30,
    mermaid: Annotated[bool, typer.Option("--mermaid", help="Draw the mined graph.")] = False,
    out: Annotated[
        Path | None, typer.Option("--propose", help="Write a draft chart (Python) to this file.")
    ] = None,
    name: Annotated[str, typer.Option(help="Name of the proposed chart.")] = "mined",
    force: Annotated[
        bool, typer.Option("--force", help="Let --propose replace an existing file.")
    ] = False,
    shadow: Annotated[
        bool,
        typer.Option("--shadow", help="Report what shadow runs in --db would have been refused."),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Mine recorded runs. Example: statechart mine traces.jsonl --propose draft.py"""

    async def go() -> None:
        if (file is None) == (db is None):
            raise LoadError("give exactly one source: a JSONL file, or --db PATH")
        source = file if file is not None else db
        assert source is not None
        if as_json and (mermaid or out is not None):
            other = "--mermaid" if mermaid else "--propose"
            raise LoadError(f"--json prints the tables' facts; it does not go with {other}")
        if shadow:
            if db is None:
                raise LoadError("--shadow reads shadow runs from a store: pass --db PATH")
            store = _existing(str(db))
            try:
                found = await shadow_refusals(store, chart=chart)
            finally:
                await _close(store)
            if as_json:
                _echo_json(shadow_json(found))
            else:
                typer.echo(shadow_report(found))
            return
        traces = await _traces(source, chart, db=db is not None)
        if not traces:
            raise LoadError(f"{source} holds no runs to mine")
        if out is not None and out.exists() and not force:
            raise LoadError(
                f"{out} exists; --propose will not replace it (it may be your edited "
                "draft, or the traces): pass --force, or another file name"
            )
        if out is not None:
            draft = propose(
                traces,
                name=name,
                threshold=threshold,
                repeat_limit=repeat_limit,
                where=str(source),
            )
            out.write_text(draft.source, encoding="utf-8")
            typer.echo(
                f"wrote {out}: {len(draft.phases)} states from {len(traces)} runs, "
                f"{len(draft.mined.rare)} rare moves left out; check it with: "
                f"statechart check {out}:chart"
            )
            return
        mined = mine(traces, threshold=threshold, repeat_limit=repeat_limit, by=by)
        if mermaid:
            typer.echo(mined_mermaid(mined))
            return
        states = state_visits(traces) if db is not None else {}
        if as_json:
            _echo_json(mined_json(mined, states=states))
        else:
            typer.echo(mined_report(mined, top=top, states=states))

    _run(go)


@app.command("drift")
def drift_command(
    before: Annotated[Path, typer.Argument(help="Runs before the change (JSONL or store).")],
    after: Annotated[Path, typer.Argument(help="Runs after the change (JSONL or store).")],
    by: By = "label",
    alpha: Annotated[float, typer.Option(help="Flag below this Holm-adjusted p.")] = DEFAULT_ALPHA,
    all_edges: Annotated[
        bool, typer.Option("--all", help="List every edge (--json always does).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Compare two sets of runs. Example: statechart drift before.jsonl after.jsonl"""

    async def go() -> None:
        a, b = await _traces(before), await _traces(after)
        found = drift(a, b, by=by, alpha=alpha)
        if as_json:
            _echo_json(drift_json(found))
        else:
            typer.echo(drift_report(found, all_edges=all_edges))

    _run(go)
