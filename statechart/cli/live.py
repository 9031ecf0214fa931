"""Showing a run as it goes: a live view on a terminal (rich), one JSON object per line
for scripts (`--json`), and the plain step lines when the output is piped."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from statechart.chart.chart import Chart
from statechart.engine import compiled
from statechart.records.codec import to_dict
from statechart.records.live import CallStarted, LiveEvent, Progress, RunEnded, RunWaiting, Token
from statechart.records.run import Run, Step
from statechart.records.spent import spent_of

SHOWN_TEXT = 2000
"""Characters of the model's streamed text the live view keeps on screen."""
LABELS = {
    "steps": "steps",
    "model_calls": "model calls",
    "tool_calls": "tool calls",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
    "tokens": "tokens",
    "cost_micros": "cost $",
    "wall_ms": "wall s",
}


def step_line(record: Step, chart: Chart) -> str:
    """One line per transition: the step, the move, and every budget around the state the
    move left, as spent (left)."""
    e, run = record.event, record.run
    parts = []
    for level in compiled(chart).levels_of(e.source):
        spent = run.ledger.get(level.path)
        used = {kind: spent_of(spent, kind) if spent else 0 for kind in level.caps}
        caps = "  ".join(
            f"{kind} {used[kind]} ({max(cap - used[kind], 0)} left)"
            for kind, cap in level.caps.items()
        )
        parts.append(f"{level.path}: {caps}")
    note = e.refused or e.reason or ""
    budget = " | ".join(parts)
    return f"{e.seq:>4}  {e.source} -> {e.target}  [{budget}]" + (f"  {note}" if note else "")


def json_line(event: LiveEvent) -> str:
    """The event as one line of JSON, its `kind` first: a step carries its stored event
    and where the run is after it; waiting and ended carry the run's outcome."""
    body: dict[str, Any]
    if isinstance(event, Step):
        run = event.run
        body = {
            "kind": "step",
            "run_id": run.run_id,
            "seq": event.event.seq,
            "state": run.state,
            "status": run.status,
            "event": to_dict(event.event),
        }
    elif isinstance(event, (RunWaiting, RunEnded)):
        run = event.run
        body = {
            "kind": event.kind,
            "run_id": run.run_id,
            "seq": run.seq,
            "state": run.state,
            "status": run.status,
            "reason": run.reason,
            "wake": run.wake,
        }
    else:
        body = {"kind": event.kind, **to_dict(event)}
    return json.dumps(body, separators=(",", ":"), default=str)


class LiveView:
    """What a terminal shows while a run goes: its state path, a bar per budget cap of
    each level around it, and the model's text as it streams; each stored step is
    printed above as the plain output's line."""

    def __init__(self, chart: Chart, run: Run, console: Console) -> None:
        self.chart = chart
        self.run = run
        self.console = console
        self.text = ""
        self.calls: dict[str, tuple[str, str]] = {}
        """The streamed model call's tool calls: id -> (tool, JSON arguments so far)."""
        self.doing = ""
        self.started = time.monotonic()
        self.live: Live | None = None

    def __enter__(self) -> LiveView:
        self.live = Live(self, console=self.console, refresh_per_second=12, transient=True)
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def on(self, event: LiveEvent) -> None:
        """Take in one live event (the drive's `on=`)."""
        if isinstance(event, Token):
            if event.tool:
                tool, sent = self.calls.get(event.tool_call_id, (event.tool, ""))
                self.calls[event.tool_call_id] = (tool, (sent + event.text)[-SHOWN_TEXT:])
            else:
                self.text = (self.text + event.text)[-SHOWN_TEXT:]
        elif isinstance(event, CallStarted):
            self.text, self.calls = "", {}
            self.doing = f"{event.call} {event.name}" + (" (again)" if event.again else "")
        elif isinstance(event, Progress):
            self.doing = f"tool {event.tool}: {event.message}"
        elif isinstance(event, Step):
            self.run = event.run
            self.doing = ""
            self.console.print(Text(step_line(event, self.chart)))
            said = [m.content for m in event.messages if m.role == "assistant" and m.content]
            if said:  # what the model wrote stays on screen once its step is stored
                self.console.print(Text("      " + " ".join(said)[-SHOWN_TEXT:], style="italic"))
        elif isinstance(event, (RunWaiting, RunEnded)):
            self.run = event.run

    def __rich__(self) -> RenderableType:
        run = self.run
        head = Text.assemble(
            ("● ", "bold cyan"),
            (run.state, "bold"),
            f"  seq {run.seq}  {time.monotonic() - self.started:5.1f}s",
            (f"  {self.doing}" if self.doing else "", "dim"),
        )
        bars = Table.grid(padding=(0, 1))
        for level in compiled(self.chart).levels_of(run.state):
            spent = run.ledger.get(level.path)
            for kind, cap in level.caps.items():
                used = spent_of(spent, kind) if spent else 0
                shown, whole = _amount(kind, used), _amount(kind, cap)
                bars.add_row(
                    Text(f"{level.path} {LABELS.get(kind, kind)}", style="dim"),
                    ProgressBar(total=max(cap, 1), completed=min(used, cap), width=30),
                    Text(f"{shown} / {whole}"),
                )
        parts: list[RenderableType] = [head, bars]
        if self.text or self.calls:
            said = Text("\n".join(self.text.splitlines()[-8:]))
            for tool, arguments in self.calls.values():
                said.append(f"\n→ {tool} {arguments}", style="cyan")
            parts.append(Panel(said, title="model", title_align="left"))
        return Group(*parts)


def _amount(kind: str, value: int) -> str:
    if kind == "cost_micros":
        return f"{value / 1e6:.4f}"
    if kind == "wall_ms":
        return f"{value / 1000:.1f}"
    return str(value)
