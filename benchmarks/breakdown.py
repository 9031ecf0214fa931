"""Where a transition's instructions go, piece by piece, counted by callgrind (issue #27).

A standalone script (never collected as a test). It drives the 200-step workload of
`durable.py` once in memory to capture a real `think` step and a real `act` step (the run
before, the effect, the outcome), then counts, each in a fresh process under callgrind,
one piece repeated K times against the same process repeating it 0 times, so start-up
cancels out: (I(K) - I(0)) / K instructions per call. Pieces: the engine's `plan` and
`advance` of each step, and inside them the call checks (`checked`: pydantic validation,
the JSON values and the fingerprint; `key_in`: the idempotency key; `Tool.parse`), the
model's and the tool's own work, `Session.absorb`, and what each store's `append` adds
(three whole runs, as `instructions.py` counts them). A transition is one `think` and one
`act` step, so a per-transition figure is the mean of the two.

    python benchmarks/breakdown.py            # about 2 minutes, needs valgrind
    python benchmarks/breakdown.py --one PIECE K    # one counted process (what valgrind runs)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from instructions import callgrind

HERE = Path(__file__).resolve().parent
PIECES = (
    "plan_think",
    "plan_act",
    "advance_think",
    "advance_act",
    "checked",
    "key_in",
    "tool_parse",
    "model_complete",
    "tool_invoke",
    "absorb",
)
K = 2000


def captured() -> dict[str, Any]:
    """A think step and an act step of a real run, with what each was given."""
    import anyio
    from durable import _Lean, chart_for, make_policy

    import statechart as sc
    from statechart.engine import Session, compiled
    from statechart.engine.transition import advance, plan

    chart = chart_for(200)
    tables = compiled(chart)
    found: dict[str, Any] = {"chart": chart, "tables": tables}

    async def main() -> None:
        store = sc.MemoryStore(encode=False)
        model = _Lean(make_policy(200))
        run = await sc.start(chart, store=store, model=model)
        session = await sc.load_session(store, run)
        for _ in range(40):  # well inside the loop: the transcript is not empty
            effect = plan(tables, run, session)
            if isinstance(effect, sc.engine.CallModel):
                outcome: Any = await model.complete(effect.request)
                kind = "think"
            else:
                outcome = await effect.tool.invoke(effect.parsed, effect.key)
                kind = "act"
            made = advance(tables, run, effect, outcome, now=1.0)
            kept = Session(list(session.transcript), set(session.fingerprints))
            kept.checked = session.checked
            found[kind] = (run, effect, outcome, kept, made)
            session.absorb(run, made)
            run = made.run
        found["model"] = model

    anyio.run(main)
    return found


def one(piece: str, k: int) -> None:
    """Run `piece` k times on the captured steps (k = 0: only the setup)."""
    import anyio

    from statechart.chart.tools import checked
    from statechart.engine.calls import key_in
    from statechart.engine.session import Session
    from statechart.engine.transition import advance, plan

    c = captured()
    tables = c["tables"]
    t_run, t_effect, reply, t_session, _ = c["think"]
    a_run, a_effect, result, a_session, a_made = c["act"]
    call = a_effect.call
    tool = a_effect.tool
    visit = a_run.visit
    work: dict[str, Any] = {
        "plan_think": lambda: plan(tables, t_run, t_session),
        "plan_act": lambda: plan(tables, a_run, a_session),
        "advance_think": lambda: advance(tables, t_run, t_effect, reply, now=1.0),
        "advance_act": lambda: advance(tables, a_run, a_effect, result, now=1.0),
        "checked": lambda: checked(tool, call),
        "key_in": lambda: key_in("r", visit, a_run.visits, tool, a_effect.fingerprint),
        "tool_parse": lambda: tool.parse(call.arguments),
        "tool_invoke": lambda: anyio.run(_many, tool.invoke, a_effect.parsed, k),
        "model_complete": lambda: anyio.run(_many, c["model"].complete, t_effect.request, k),
        "absorb": lambda: Session(transcript=[]).absorb(a_run, a_made),
    }
    fn = work[piece]
    if piece in ("tool_invoke", "model_complete"):
        if k:
            fn()
    else:
        for _ in range(k):
            fn()
    print(k)


async def _many(fn: Any, arg: Any, k: int) -> None:
    for _ in range(k):
        await fn(arg)


def counted(piece: str, k: int) -> int:
    env = {**os.environ, "PYTHONPATH": f"{HERE.parent}{os.pathsep}{HERE}", "PYTHONHASHSEED": "0"}
    instructions, _ = callgrind([sys.executable, str(HERE / "breakdown.py"), "--one", piece,
                                 str(k)], env)  # fmt: skip
    return instructions


def stores() -> dict[str, int]:
    """Instructions per transition of whole runs (instructions.py's method), by store."""
    from instructions import counted as whole

    out = {}
    for kind in ("memory_raw", "memory", "process"):
        (a, n), (b, m) = whole(kind, 20), whole(kind, 200)
        out[kind] = round((b - a) / (m - n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=2, metavar=("PIECE", "K"))
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]))
        return
    result: dict[str, Any] = {"per_call": {}}
    for piece in PIECES:
        base = counted(piece, 0)
        result["per_call"][piece] = round((counted(piece, K) - base) / K)
        print(f"{piece}: {result['per_call'][piece]:,} instructions a call", flush=True)
    result["whole_runs_per_transition"] = stores()
    print(json.dumps(result["whole_runs_per_transition"]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
