"""`statechart charts`: the charts installed packages register (entry-point group
`statechart.charts`), each loaded to show its name and version, or why it does not load."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from statechart.cli.app import _explained, _run, app
from statechart.cli.exits import say
from statechart.io.loading import GROUP, load_chart, registered_charts


def _listed() -> list[dict[str, Any]]:
    """One row per registered chart: its entry point, then the chart's name and version,
    or the error loading it (one line)."""
    rows: list[dict[str, Any]] = []
    for ep in registered_charts():
        row: dict[str, Any] = {
            "name": ep.name,
            "target": ep.value,
            "package": ep.dist.name if ep.dist is not None else None,
            "chart": None,
            "version": None,
            "error": None,
        }
        try:
            chart, _ = load_chart(ep.value)
        except Exception as exc:  # a broken package must not hide the others
            row["error"] = " ".join(_explained(exc).split())
        else:
            row["chart"], row["version"] = chart.name, chart.version
        rows.append(row)
    return rows


@app.command()
def charts(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """List the charts installed packages register; run one with `statechart run NAME`.

    Example: statechart charts --json
    """

    async def go() -> None:
        rows = _listed()
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        if not rows:
            say(f"no charts registered (entry-point group {GROUP}; see docs/cli.md)")
            return
        name_w = max(4, *(len(r["name"]) for r in rows))
        target_w = max(6, *(len(r["target"]) for r in rows))
        say(f"{'NAME':<{name_w}}  {'TARGET':<{target_w}}  {'CHART':<20} VERSION", "bold")
        for r in rows:
            head = f"{r['name']:<{name_w}}  {r['target']:<{target_w}}  "
            if r["error"] is not None:
                say(head + f"error: {r['error']}", "red")
            else:
                say(head + f"{r['chart']:<20} {r['version']}")

    _run(go)
