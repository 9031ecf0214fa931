"""The workload on LangGraph: a hand-written `StateGraph` and the prebuilt ReAct agent.

Both are driven by a langchain-core fake chat model (`ScriptedChat`, a
`FakeMessagesListChatModel` whose `bind_tools` returns itself) that answers from
a script: `fetch(n)` tool calls, then a plain answer. The script is read from
the messages (the first message says how many calls; the call number is the
count of messages so far), so one compiled graph serves every run, concurrent
runs, and a resumed thread. One "transition" is one super-step, counted as one
node execution (agent or tools): 2N + 1 for N tool calls. Durable runs use
`SqliteSaver` on a real file with `durability="sync"`.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
from durable import fetch
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import create_react_agent
from pydantic import Field
from side_common import remove_db, tool_calls

FETCH_TOOL: BaseTool = tool(fetch)


class ScriptedChat(FakeMessagesListChatModel):
    """Scripted replies: `fetch(n)` while n <= the calls asked for, then `done`."""

    responses: list[BaseMessage] = Field(default_factory=list)
    latency: float = 0.0

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        calls = int(str(messages[0].content).rsplit("=", 1)[1])
        n = (len(messages) + 1) // 2
        if n <= calls:
            message = AIMessage(
                content="",
                tool_calls=[
                    {"name": "fetch", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}
                ],
            )
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            time.sleep(self.latency)
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            await anyio.sleep(self.latency)
        return self._reply(messages)


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def route(state: AgentState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def hand_written(
    model: ScriptedChat,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    *,
    asynchronous: bool = False,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Agent node + tools node + a conditional edge, as in LangGraph's own tutorial."""
    tools = {FETCH_TOOL.name: FETCH_TOOL}

    def run_tools(state: AgentState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(content=tools[c["name"]].invoke(c["args"]), tool_call_id=c["id"])
                for c in last.tool_calls
            ]
        }

    def agent(state: AgentState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: AgentState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(AgentState)
    graph.add_node("agent", aagent if asynchronous else agent)  # type: ignore[arg-type]
    graph.add_node("tools", run_tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def prebuilt(
    model: ScriptedChat, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """`langgraph.prebuilt.create_react_agent` with the same model and tool."""
    return create_react_agent(model, [FETCH_TOOL], checkpointer=checkpointer)


def inputs(steps: int) -> dict[str, list[AnyMessage]]:
    return {"messages": [HumanMessage(content=f"fetch the records; calls={tool_calls(steps)}")]}


def config(steps: int, thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 4 * steps + 20}


def node_runs(state: dict[str, Any]) -> int:
    """Node executions of a finished run: one per message after the first."""
    return len(state["messages"]) - 1


def sqlite_saver(path: Path) -> SqliteSaver:
    """`SqliteSaver` on a real file, set up; WAL (its own setup) and synchronous=NORMAL."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


GRAPHS: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {}


def graph_for(
    kind: str, path: Path | None = None, fresh: bool = True
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """`graph`/`react` (no checkpointer, shared), `_inmemory` (new saver), `_sqlite` (file;
    a new one unless not `fresh`)."""
    if kind in ("graph", "react"):
        if kind not in GRAPHS:
            model = ScriptedChat()
            GRAPHS[kind] = hand_written(model) if kind == "graph" else prebuilt(model)
        return GRAPHS[kind]
    saver: BaseCheckpointSaver[Any]
    if kind.endswith("_sqlite"):
        assert path is not None
        if fresh:
            remove_db(path)
        saver = sqlite_saver(path)
    else:
        saver = InMemorySaver()
    model = ScriptedChat()
    return hand_written(model, saver) if kind.startswith("graph") else prebuilt(model, saver)


def close(graph: CompiledStateGraph[Any, Any, Any, Any], path: Path | None) -> None:
    saver = graph.checkpointer
    if isinstance(saver, SqliteSaver):
        saver.conn.close()
    if path is not None:
        remove_db(path)


def langgraph_once(
    kind: str, steps: int, path: Path | None = None, keep: list[Callable[[], None]] | None = None
) -> tuple[float, int]:
    """Seconds for the whole workload (sync `invoke`) and super-steps made.

    With `keep`, the saver's connection stays open and its closer is appended there.
    """
    graph = graph_for(kind, path, fresh=keep is None)
    durable = kind.endswith("_sqlite")
    t0 = time.perf_counter()
    if durable:
        out = graph.invoke(inputs(steps), config(steps), durability="sync")
    else:
        out = graph.invoke(inputs(steps), config(steps))
    elapsed = time.perf_counter() - t0
    n = node_runs(out)
    if n != 2 * tool_calls(steps) + 1:
        raise SystemExit(f"langgraph {kind} made {n} node runs for {steps} steps")
    if keep is not None:
        keep.append(lambda: close(graph, None))
    else:
        close(graph, path)
    return elapsed, n


def langgraph_stopped(steps: int, path: Path) -> None:
    """A durable thread of a longer workload stopped after `steps` super-steps."""
    graph = graph_for("graph_sqlite", path)
    updates = graph.stream(
        inputs(2 * steps), config(2 * steps), durability="sync", stream_mode="updates"
    )
    for n, _ in enumerate(updates, 1):
        if n == steps:
            break
    saver = graph.checkpointer
    assert isinstance(saver, SqliteSaver)
    saver.conn.close()


def langgraph_resume(steps: int, source: Path, copy: Path) -> dict[str, float]:
    """Milliseconds of two passes, each on a fresh copy of the stopped thread's file.

    Pass 1: open a `SqliteSaver`, build and compile the graph, then `get_state` alone.
    Pass 2: from nothing to the first new super-step: open, build + compile,
    `stream(None, config)` (which reads the thread's last checkpoint itself).
    """
    clock = time.perf_counter
    remove_db(copy)
    shutil.copyfile(source, copy)
    t0 = clock()
    saver = sqlite_saver(copy)
    t1 = clock()
    graph = hand_written(ScriptedChat(), saver)
    t2 = clock()
    state = graph.get_state(config(2 * steps))
    t3 = clock()
    saver.conn.close()
    done = len(state.values["messages"]) - 1
    if abs(done - steps) > 1:
        raise SystemExit(f"langgraph resume found {done} super-steps, not {steps}")
    remove_db(copy)
    shutil.copyfile(source, copy)
    t4 = clock()
    saver = sqlite_saver(copy)
    graph = hand_written(ScriptedChat(), saver)
    stream = graph.stream(None, config(2 * steps), durability="sync", stream_mode="updates")
    next(iter(stream))
    t5 = clock()
    stream.close()
    saver.conn.close()
    remove_db(copy)
    return {
        "open_ms": (t1 - t0) * 1e3,
        "build_ms": (t2 - t1) * 1e3,
        "state_ms": (t3 - t2) * 1e3,
        "first_step_ms": (t5 - t4) * 1e3,
        "steps_found": float(done),
    }
