"""A chart compiled for running: the flattened state tree, transition tables, budget levels.

The tables are read back out of the chart's one `transitions` machine (see
`machine.py`); `fire()` answers from them (a dict lookup instead of ~100 µs of
`transitions` machinery), and a hypothesis test shows that tables and machine
agree on every (state, trigger, guard outcome). Nothing here does I/O or awaits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from statechart.chart.budget import Budget
from statechart.chart.chart import Chart, Edge, State
from statechart.chart.names import CANCELLED, ESCALATED, EXHAUSTED, ROOT, SUBSTATES
from statechart.chart.tools import Tool
from statechart.chart.validate import validate_root
from statechart.engine.history import applied, place
from statechart.engine.machine import EXIT, MachinePair
from statechart.engine.reasons import waiting_for_approval
from statechart.errors import IllegalTransitionError

if TYPE_CHECKING:
    from statechart.engine.prompt import ModelView
from statechart.engine.parts import (
    CANCEL,
    INTERNAL,
    JOIN,
    REGION_FAILED,
    Level,
    Move,
    Node,
    Timer,
    Transition,
    exhaust,
    go,
)
from statechart.records.run import Status
from statechart.records.spent import ZERO, Spent

__all__ = [
    "CANCEL",
    "INTERNAL",
    "CompiledChart",
    "Level",
    "Move",
    "Node",
    "Transition",
    "compiled",
    "exhaust",
    "go",
    "status_of",
]


class CompiledChart:
    """A chart compiled for running: node index, machine, tables, budget levels."""

    def __init__(self, chart: Chart) -> None:
        validate_root(chart)
        self.chart = chart
        self.nodes: dict[str, Node] = {}
        self.transitions: list[Transition] = []
        self.levels: dict[str, Level] = {}
        self.scopes: dict[str, type[BaseModel]] = {"": chart.context}
        """The context type of every scope: the root's, and each ported sub-chart's."""
        self.timers: dict[str, list[Timer]] = {}
        """The `after=` edges leaving each state (by path): armed when it is entered."""
        self.histories: dict[str, str] = {}
        """The chart states with `history=` (by path): `shallow` or `deep`."""
        self.parallels: dict[str, tuple[str, ...]] = {}
        """The parallel states (by path) -> their regions' paths, in order."""
        self.region_charts: dict[str, Chart] = {}
        """The sub-chart of every region, by the region's path."""
        self.maps: dict[str, State] = {}
        """The map states (by path): their regions are the instances, one per item."""
        self._tree = self._walk(chart, "", "")
        self.nodes[CANCELLED] = Node(CANCELLED, State(CANCELLED, kind="terminal"), chart, "")
        self._tree.append(CANCELLED)
        for path, node in self.nodes.items():
            if "." not in path and node.state is not None and node.state.kind != "terminal":
                self.transitions.append(Transition(CANCEL, path, CANCELLED))
        assert chart.budget is not None  # validate_root checked it
        self.levels[ROOT] = Level(
            ROOT, chart.budget.caps(), exhaust(ROOT), strict=chart.budget.strict
        )
        for path in self.nodes:
            if "." not in path and self._nonterminal(path):
                self.transitions.append(Transition(exhaust(ROOT), path, chart.on_exhausted))
        self.strict: dict[str, tuple[Level, ...]] = {}
        """The strict budget levels around each leaf (filled by `engine.strict`)."""
        self.views: dict[str, ModelView] = {}
        """What each model state shows the model (filled by `prompt.model_view`)."""
        self.react: dict[str, Any] = {}
        """The compiled loop of each model state's think and act (filled by `react.loop_at`)."""
        self.limits: dict[tuple[str, str], Any] = {}
        """The fixed part of each call's time limit by (leaf, tool) (`deadlines.limit`)."""
        self._chains: dict[str, tuple[str, ...]] = {}
        self._resolved: dict[tuple[str, str], Transition] = {}
        self._moves: dict[tuple[str, str, str, bool], Move] = {}
        self.initial_leaf = self.descend(str(chart.initial))
        self.table = self._read_tables()

    def _read_tables(self) -> dict[str, dict[str, Transition]]:
        """source -> trigger -> transition, read back out of the built `transitions` machine."""
        ours = {(t.trigger, t.source, t.dest): t for t in self.transitions}
        table: dict[str, dict[str, Transition]] = {}
        for trigger, source, dest in self._machines.transitions():
            table.setdefault(source, {})[trigger] = ours.pop((trigger, source, dest))
        if ours:
            raise RuntimeError(f"machine lacks compiled transitions {sorted(ours)[:3]}")
        return table

    # -- building -------------------------------------------------------------

    def _nonterminal(self, path: str) -> bool:
        state = self.nodes[path].state
        return state is not None and state.kind != "terminal"

    def _walk(self, chart: Chart, prefix: str, scope: str) -> list[Any]:
        tree: list[Any] = []
        for s in chart.states:
            path = prefix + s.name
            self.nodes[path] = Node(path, s, chart, prefix, scope)
            if s.kind == "model":
                for sub in SUBSTATES:
                    self.nodes[f"{path}.{sub}"] = Node(f"{path}.{sub}", None, chart, prefix, scope)
                for trig, src, dst in INTERNAL:
                    self.transitions.append(Transition(trig, f"{path}.{src}", f"{path}.{dst}"))
                tree.append({"name": s.name, "children": list(SUBSTATES), "initial": "think"})
            elif s.kind == "chart":
                child = chart.children[s.name]
                if s.history is not None:
                    self.histories[path] = s.history
                if s.ported:
                    self.scopes[path] = child.context
                sub_tree = self._walk(child, path + ".", path if s.ported else scope)
                tree.append({"name": s.name, "children": sub_tree, "initial": child.initial})
                for term in child.states:
                    if term.kind == "terminal":
                        target = s.exits.get(term.name)
                        if target is None:
                            target = s.on_exhausted if term.name == EXHAUSTED else ESCALATED
                        self.transitions.append(
                            Transition(EXIT, f"{path}.{term.name}", prefix + target)
                        )
            elif s.kind in ("parallel", "map"):
                if s.kind == "map":
                    self.maps[path] = s
                tree.append({"name": s.name, "children": self._regions(chart, path, s, scope)})
                self.transitions.append(Transition(JOIN, path, prefix + s.exits["done"]))
                self.transitions.append(
                    Transition(REGION_FAILED, path, prefix + s.on_region_failure)
                )
            else:
                tree.append(s.name)
            self._add_exits(chart, prefix, s)
        for e in chart.edges:
            self._add_edge(prefix, e)
        return tree

    def _regions(self, chart: Chart, path: str, s: State, scope: str) -> list[Any]:
        """Compile the regions of parallel state `s` at `path`: each a sub-chart under
        `path.region`, with its own budget level, ending in its terminals (no exit)."""
        trees: list[Any] = []
        paths = []
        for r in s.regions:
            at = f"{path}.{r.name}"
            child = chart.children[f"{s.name}.{r.name}"]
            paths.append(at)
            self.nodes[at] = Node(at, r, chart, path + ".", scope)
            self.region_charts[at] = child
            if r.ported:
                self.scopes[at] = child.context
            sub_tree = self._walk(child, at + ".", at if r.ported else scope)
            trees.append({"name": r.name, "children": sub_tree, "initial": child.initial})
            budget = r.budget.merged(child.budget) if r.budget else child.budget
            if budget is not None and budget.caps():
                self.levels[at] = Level(at, budget.caps(), exhaust(at), strict=budget.strict)
                self.transitions.append(Transition(exhaust(at), at, f"{at}.{EXHAUSTED}"))
        self.parallels[path] = tuple(paths)
        return trees

    def _add_edge(self, prefix: str, e: Edge) -> None:
        src, dst = prefix + e.source, prefix + e.target
        self.transitions.append(Transition(go(dst), src, dst, e, f"{src}->{dst}", named=True))
        if isinstance(e.after, float):
            self.timers.setdefault(src, []).append(Timer(f"{src}->{dst}", dst, e.after))

    def _add_exits(self, chart: Chart, prefix: str, s: State) -> None:
        if s.kind == "terminal":
            return
        path = prefix + s.name
        declared = {(e.source, e.target) for e in chart.edges}
        if s.kind == "approval":
            for target in {s.on_approve, s.on_reject}:
                if target is not None and (s.name, target) not in declared:
                    self._add_edge(prefix, Edge(s.name, target))
                    declared.add((s.name, target))
        if (s.name, ESCALATED) not in declared:
            self.transitions.append(
                Transition(go(prefix + ESCALATED), path, prefix + ESCALATED, named=True)
            )
        budget: Budget | None = s.budget
        if s.kind == "chart":
            budget = chart.children[s.name].budget
            budget = s.budget.merged(budget) if s.budget else budget
            target = path + "." + EXHAUSTED
        else:
            target = prefix + s.on_exhausted
        if budget is not None and budget.caps():
            self.levels[path] = Level(path, budget.caps(), exhaust(path), strict=budget.strict)
        if s.kind == "model" or path in self.levels:
            self.transitions.append(Transition(exhaust(path), path, target))

    # -- reading --------------------------------------------------------------

    def ancestors(self, leaf: str) -> tuple[str, ...]:
        """`a.b.c` -> (`a.b.c`, `a.b`, `a`), cached per leaf."""
        chain = self._chains.get(leaf)
        if chain is None:
            parts = leaf.split(".")
            chain = tuple(".".join(parts[:i]) for i in range(len(parts), 0, -1))
            self._chains[leaf] = chain
        return chain

    def descend(self, path: str, history: dict[str, str] | None = None) -> str:
        """The leaf entered when entering `path`: initial sub-states, any depth, or where
        a `history=` chart state was interrupted (`history`: the run's `Run.history`)."""
        node = self.nodes[path]
        state = node.state
        if state is not None and state.kind == "model":
            return f"{path}.think"
        if state is not None and state.kind == "chart":
            back = history.get(path) if history and path in self.histories else None
            if back is not None and back in self.nodes and back.startswith(path + "."):
                return self.descend(back, history)
            child = self.region_charts.get(path) or node.chart.children[state.name]
            return self.descend(f"{path}.{child.initial}", history)
        return path

    def resolve(self, leaf: str, trigger: str) -> Transition | None:
        """The transition `trigger` takes from `leaf` (searching outward), or None if illegal."""
        found = self._resolved.get((leaf, trigger))
        if found is not None:
            return found
        for anc in self.ancestors(leaf):
            t = self.table.get(anc, {}).get(trigger)
            if t is not None:
                self._resolved[(leaf, trigger)] = t  # only hits: handlers may name anything
                return t
        return None

    def fired(self, leaf: str, trigger: str) -> Move:
        """The move of a trigger the engine fires itself (`propose`, `results`, `ask`,
        `approved`, `rejected`, `cancel`), which the compiled chart always allows there."""
        t = self.resolve(leaf, trigger)
        if t is None:
            raise IllegalTransitionError(leaf, trigger, "the engine fired it where it is not legal")
        return self.move(leaf, t)

    def move(self, leaf: str, t: Transition, history: dict[str, str] | None = None) -> Move:
        """Apply a resolved transition: follow initial sub-states and sub-chart exits. A
        run's move passes its `Run.history`: a `history=` chart state it enters resumes
        where it was interrupted, and the move says what it remembers and forgets; None
        (the chart's structure alone, as the `transitions` machine has it) ignores both."""
        if history and self.histories:
            return self._move(leaf, t, history)  # rare: not cached, it depends on the run
        key = (leaf, t.source, t.trigger, history is None)
        found = self._moves.get(key)
        if found is None or found.transition is not t:
            found = self._moves[key] = self._move(leaf, t, history)
        return found

    def _move(self, leaf: str, t: Transition, history: dict[str, str] | None = None) -> Move:
        """Exited: the source and what it contains, plus every sub-chart host left through
        an exit. Entered: what is active afterwards and was not, or was exited on the way."""
        left = [t.source]
        through = []
        if t.trigger == EXIT:
            left.append(t.source.rsplit(".", 1)[0])
            through.append(t.source)
        changes: dict[str, str] = {}
        if self.histories and history is not None:  # history states left at the source
            owner = self.owner_state(leaf)[0]
            for path in self.ancestors(leaf):
                kind = self.histories.get(path)
                if kind is not None and (path == t.source or path.startswith(t.source + ".")):
                    changes[path] = place(path, kind, owner)
            history = applied(history or {}, changes)
        dest = t.dest
        while True:
            new_leaf = self.descend(dest, history)
            out = self.table.get(new_leaf, {}).get(EXIT)
            if out is None:
                break
            host = new_leaf.rsplit(".", 1)[0]
            left.append(host)  # a sub-chart terminal: its host is left
            through.append(new_leaf)
            if host in self.histories and history:  # its sub-chart ended: forget it
                changes[host] = ""
                history = applied(history, {host: ""})
            dest = out.dest
        before, after = self.ancestors(leaf), self.ancestors(new_leaf)
        exited = tuple(
            p
            for p in before
            if p not in after or any(p == s or p.startswith(s + ".") for s in left)
        )
        entered = tuple(p for p in reversed(after) if p not in before or p in exited)
        starts: tuple[tuple[str, str], ...] = ()
        if new_leaf in self.parallels:  # its regions start, level by level
            starts = tuple((r, self.descend(r, history)) for r in self.parallels[new_leaf])
            chains = [(r, *self.ancestors(at)[::-1][len(self.ancestors(r)) :]) for r, at in starts]
            depth = max(len(c) for c in chains)
            entered += tuple(c[i] for i in range(depth) for c in chains if i < len(c))
        found = self._finish(t, new_leaf, exited, entered, tuple(through))
        if starts:
            found = replace(found, regions=starts)
        if changes and found.status == "ended":  # an ended run comes back to nothing
            changes = {path: where for path, where in changes.items() if not where}
        return replace(found, remembered=changes) if changes else found

    def _finish(
        self,
        t: Transition,
        leaf: str,
        exited: tuple[str, ...],
        entered: tuple[str, ...],
        through: tuple[str, ...] = (),
    ) -> Move:
        counted = tuple(p for p in entered if self.nodes[p].state is not None)
        owner, state = self.owner_state(leaf)
        visit = owner if state.kind == "model" and owner in entered else None
        status = status_of(self, leaf)
        crosses = len(self.scopes) > 1 and any(p in self.scopes for p in (*exited, *entered))
        reason = (
            waiting_for_approval(owner)
            if status == "waiting"
            else f"ended in '{leaf}'"
            if status == "ended"
            else ""
        )
        clears = visit is None and state.kind != "model"
        return Move(
            t, leaf, exited, entered, counted, visit, status, through, crosses, None, reason, clears
        )

    @cached_property
    def user_edges(self) -> dict[str, Transition]:
        """The transitions that are the user's edges, by their counter key (full paths)."""
        return {t.counter: t for t in self.transitions if t.edge is not None}

    def charged(self, ledger: dict[str, Spent], leaf: str, usage: Spent) -> dict[str, Spent]:
        """A copy of `ledger` with `usage` added to every budget level around `leaf`."""
        out = ledger.copy()
        paths = self._level_paths.get(leaf)
        if paths is None:
            paths = tuple(level.path for level in self.levels_of(leaf))
        for path in paths:
            out[path] = out.get(path, ZERO) + usage
        return out

    @cached_property
    def untimed(self) -> bool:
        """No call in the chart has a time limit: no timeout anywhere and no wall budget
        (the driver then skips `deadlines.limit`)."""
        for node in self.nodes.values():
            if node.chart.call_timeout is not None:
                return False
            state = node.state
            if state is not None and (
                state.call_timeout is not None or any(t.timeout for t in state.tools)
            ):
                return False
        return not any("wall_ms" in level.caps for level in self.levels.values())

    def rearmed(
        self,
        timers: dict[str, float],
        exited: tuple[str, ...],
        entered: tuple[str, ...],
        now: float,
    ) -> dict[str, Any]:
        """The run's `timers` and `wake` after a move: the `after=` edges of the states it
        left are disarmed, those of the states it entered armed from `now`."""
        out = {k: due for k, due in timers.items() if k.partition("->")[0] not in exited}
        for path in entered:
            for timer in self.timers.get(path, ()):
                out[timer.label] = now + timer.seconds
        found: dict[str, Any] = {"wake": min(out.values()) if out else None}
        if out != timers:
            found["timers"] = out
        return found

    @cached_property
    def _level_paths(self) -> dict[str, tuple[str, ...]]:
        return {
            p: tuple(level.path for level in levels) for p, levels in self._levels_cache.items()
        }

    def levels_of(self, leaf: str) -> tuple[Level, ...]:
        """Budget levels containing `leaf`, outermost first."""
        return self._levels_cache.get(leaf) or self._levels_for(leaf)

    @cached_property
    def _levels_cache(self) -> dict[str, tuple[Level, ...]]:
        return {p: self._levels_for(p) for p in self.nodes}

    def _levels_for(self, leaf: str) -> tuple[Level, ...]:
        found = [self.levels[ROOT]]
        for anc in reversed(self.ancestors(leaf)):
            if anc in self.levels:
                found.append(self.levels[anc])
        return tuple(found)

    def tools_of(self, path: str) -> dict[str, Tool]:
        """The tools of the state at `path` by name (none for a path that is not a state)."""
        state = self.nodes[path].state
        return state.tool_map if state is not None else {}

    def owner_state(self, leaf: str) -> tuple[str, State]:
        """The nearest user-defined state containing `leaf` (skips think/act/approve)."""
        for anc in self.ancestors(leaf):
            node = self.nodes[anc]
            if node.state is not None:
                return anc, node.state
        raise KeyError(leaf)

    # -- firing -----------------------------------------------------------------

    def fire(self, leaf: str, trigger: str, allow: Callable[[Transition], bool]) -> Move | None:
        """Resolve `trigger` from `leaf`; None when its guard refuses; raises if illegal."""
        t = self.resolve(leaf, trigger)
        if t is None:
            raise IllegalTransitionError(leaf, trigger, "no edge allows it")
        if t.edge is not None and t.edge.guard is not None and not allow(t):
            return None
        return self.move(leaf, t)

    @cached_property
    def machine(self) -> Any:
        """The `transitions` machine this chart compiles to (one per chart, shared)."""
        return self._machines.machine

    @cached_property
    def _machines(self) -> MachinePair:
        return MachinePair(self._tree, self.transitions, self.initial_leaf, list(self.nodes))

    def machine_fire(
        self,
        leaf: str,
        trigger: str,
        allow: Callable[[Transition], bool],
        trace: list[tuple[str, str]] | None = None,
    ) -> str | None:
        """Ask the `transitions` machine itself (for the differential test and the floor).

        With `trace`, the states the machine exits and enters are appended to it in order.
        """
        return self._machines.fire(leaf, trigger, allow, trace)


def compiled(chart: Chart) -> CompiledChart:
    """The chart compiled for running, built once and kept in a private slot on the chart
    (a `Chart` is not hashable, so no cache keyed by it)."""
    found: CompiledChart | None = chart._compiled
    if found is None:
        found = CompiledChart(chart)
        object.__setattr__(chart, "_compiled", found)
    return found


def status_of(compiled_chart: CompiledChart, leaf: str) -> Status:
    """The status of a run whose current leaf is `leaf`: `waiting` at an approval, `ended`
    in a terminal that no sub-chart exit leaves, else `running`."""
    node_state = compiled_chart.nodes[leaf].state
    if leaf.endswith(".approve") or (node_state is not None and node_state.kind == "approval"):
        return "waiting"
    if compiled_chart.owner_state(leaf)[
        1
    ].kind == "terminal" and EXIT not in compiled_chart.table.get(leaf, {}):
        return "ended"
    return "running"
