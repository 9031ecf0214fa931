"""Tools: typed callables with a JSON schema, a retry policy and an output cap.

The retry policy is mandatory because it decides what resuming after a crash
may do with a call that started and never finished (see docs/concepts.md).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ValidationError, create_model

from statechart.chart.retry import Retry
from statechart.chart.tool_context import ToolContext
from statechart.errors import ChartError, ChartWarning, ToolArgumentsError, ToolDefinitionError
from statechart.records.messages import ToolCall
from statechart.records.run import CheckedCall

RetryPolicy = Literal["safe", "keyed", "reconcile", "never"]
RETRY_POLICIES: tuple[str, ...] = ("safe", "keyed", "reconcile", "never")
DEFAULT_OUTPUT_CAP = 8000
KEY_PARAMETER = "idempotency_key"
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI and Anthropic accept as a tool name."""


_PLAIN = frozenset({str, dict, list, tuple, int, float, bool, type(None)})
"""Result types that are never awaitable (the common results skip the slower check)."""


@dataclass(frozen=True)
class Tool:
    """A callable the model may ask for, with what the runtime needs to run it safely.

    Build one with the `tool` decorator rather than by hand: it derives `args_model`,
    `schema` and `description` from the function.

    Example:
        ```python
        import anyio

        from statechart import Tool, tool


        @tool(retry="safe")
        def search_kb(query: str, limit: int = 3) -> str:
            "Search the knowledge base."
            return f"{limit} articles about {query}"


        assert isinstance(search_kb, Tool) and search_kb.schema["required"] == ["query"]
        assert anyio.run(search_kb.invoke, {"query": "refunds"}) == "3 articles about refunds"
        ```
    """

    name: str
    """The name the model calls it by."""
    description: str
    """What the tool does, shown to the model."""
    fn: Callable[..., Any]
    """The function; sync or async. Keyed tools receive `idempotency_key=`."""
    args_model: type[BaseModel]
    """Validates the arguments; its JSON schema is what the model sees."""
    retry: RetryPolicy
    """What a resume may do with a call that started and never completed."""
    needs_approval: bool = False
    """A human must approve each call before it runs."""
    repeatable: bool = False
    """Calls with the same arguments may run more than once."""
    output_cap: int = DEFAULT_OUTPUT_CAP
    """Results longer than this many characters are truncated."""
    reconcile: Callable[..., Any] | None = None
    """For `retry="reconcile"`: asks the outside world what happened to a call."""
    schema: dict[str, Any] = field(default_factory=dict)
    """The JSON schema of the arguments (filled in by `tool`)."""
    inline: bool = False
    """Run a sync `fn` on the event loop's thread, not in a worker thread: only for a
    function that returns in microseconds and never blocks (no I/O, sleep or lock)."""
    timeout: float | None = None
    """Seconds a call may run; past them it is a failed call (`CallTimeoutError`). None
    takes the chart's `call_timeout`, if it has one."""
    retries: Retry | None = None
    """How a failed call is tried again (each attempt an event, the wait a durable timer);
    None: a failed call's error goes to the model at once."""
    threaded: bool = field(default=False, init=False, repr=False, compare=False)
    """The driver runs `fn` in a worker thread: it is sync and not `inline`."""
    context_parameter: str | None = field(default=None, init=False, repr=False, compare=False)
    """The parameter of `fn` annotated `ToolContext`, if any (the runtime passes it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "threaded", not self.inline and not asynchronous(self.fn))
        object.__setattr__(self, "context_parameter", context_parameter(self.fn))
        if self.timeout is not None:
            object.__setattr__(
                self,
                "timeout",
                positive_seconds(f"tool '{self.name}'", self.timeout, ToolDefinitionError),
            )

    def keywords(
        self, arguments: BaseModel, key: str | None = None, context: ToolContext | None = None
    ) -> dict[str, Any]:
        """The keyword arguments `fn` is called with: the typed fields, the idempotency
        key when the tool is keyed, and its `ToolContext` when it takes one."""
        kwargs = dict(arguments.__dict__)  # its fields by name (extras, private values apart)
        if self.retry == "keyed":
            kwargs[KEY_PARAMETER] = key
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context or ToolContext(tool=self.name)
        return kwargs

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validated arguments as JSON values (what is fingerprinted and stored)."""
        values: dict[str, Any] = self.args_model.__pydantic_serializer__.to_python(
            self.parse(arguments), mode="json"
        )
        return values

    def parse(self, arguments: dict[str, Any]) -> BaseModel:
        """Validated, typed arguments; raises `ToolArgumentsError` with what to fix."""
        try:
            parsed: BaseModel = self.args_model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(self.name, exc) from None
        return parsed

    async def invoke(
        self,
        arguments: dict[str, Any] | BaseModel,
        key: str | None = None,
        context: ToolContext | None = None,
    ) -> Any:
        """Run the tool with its typed arguments (its idempotency key when keyed, its
        `ToolContext` when it takes one), on the calling thread: the driver runs a
        `threaded` tool in a worker thread instead."""
        parsed = arguments if isinstance(arguments, BaseModel) else self.parse(arguments)
        out = self.fn(**self.keywords(parsed, key, context))
        if type(out) not in _PLAIN and inspect.isawaitable(out):
            out = await out
        return out

    async def reconciled(self, arguments: BaseModel, key: str | None) -> Any:
        """Ask the reconcile hook about an interrupted call: its result if it ran, else None.

        The hook takes the tool's arguments (and `idempotency_key=` if it names one)."""
        assert self.reconcile is not None, self.name
        out = self.reconcile(**self.reconcile_keywords(arguments, key))
        if inspect.isawaitable(out):
            out = await out
        return out

    def reconcile_keywords(self, arguments: BaseModel, key: str | None) -> dict[str, Any]:
        """The keyword arguments the reconcile hook is called with."""
        assert self.reconcile is not None, self.name
        kwargs = {name: getattr(arguments, name) for name in self.args_model.model_fields}
        if KEY_PARAMETER in inspect.signature(self.reconcile).parameters:
            kwargs[KEY_PARAMETER] = key
        return kwargs


def tool(
    *,
    retry: RetryPolicy,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    repeatable: bool = False,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    reconcile: Callable[..., Any] | None = None,
    timeout: float | None = None,
    inline: bool = False,
    retries: Retry | None = None,
) -> Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a `Tool`; the schema comes from its signature.

    Args:
        retry: What resuming may do with a call that started and never finished:
            `safe` re-runs it, `keyed` re-runs it with the recorded idempotency key,
            `reconcile` asks the `reconcile` hook, `never` asks a human.
        name: The name the model calls it by (the function's name by default).
        description: What it does, shown to the model (the docstring's first line).
        needs_approval: Every call waits for a human's approval before it runs.
        repeatable: Calls with the same arguments may run again (no repeat refusal).
        output_cap: Characters of the result the transcript keeps.
        reconcile: For `retry="reconcile"`: reports what happened to an interrupted call.
        timeout: Seconds a call may run before it is cut off as a failed call (the model
            sees a `CallTimeoutError`); by default the chart's `call_timeout`.
        inline: Run a sync function on the event loop's thread instead of a worker thread;
            only for one that returns in microseconds and never blocks.
        retries: Try a failed call again with backoff (`Retry`); the model sees only the
            last failure. Unlike `retry`, which says what a resume may do with a call
            interrupted by a crash.

    Returns:
        A decorator that makes the `Tool`.

    Raises:
        ToolDefinitionError: No valid retry policy, `reconcile` without its hook, or a
            name providers refuse (they accept `^[a-zA-Z0-9_-]{1,64}$`).

    A tool with neither a docstring nor `description=` builds with a `ChartWarning`.

    Example:
        ```python
        from statechart import tool


        @tool(retry="safe")
        async def search_kb(query: str, limit: int = 3) -> str:
            "Search the knowledge base."
            return "KB-12: refunds take 5 days."


        @tool(retry="keyed", needs_approval=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            "Refund an order; the payments API ignores a repeated key."
            return f"refunded {amount} on {order}"


        assert "idempotency_key" not in refund.schema["properties"]  # the runtime passes it
        ```
    """
    if retry not in RETRY_POLICIES:
        raise ToolDefinitionError(
            f"retry={retry!r} is not a retry policy; use one of {', '.join(RETRY_POLICIES)}"
        )

    def wrap(fn: Callable[..., Any]) -> Tool:
        tool_name = name or fn.__name__
        if not TOOL_NAME.match(tool_name):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: providers accept only 1-64 letters, digits, '_' or '-' "
                "as a tool name; pass name= with such a name"
            )
        if retry == "reconcile" and reconcile is None:
            raise ToolDefinitionError(
                f"tool '{tool_name}' has retry='reconcile' but no reconcile= hook; "
                "pass a function that reports what happened to a call"
            )
        args_model = _args_model(tool_name, fn, keyed=retry == "keyed")
        doc = description or inspect.getdoc(fn)
        if not doc or not doc.strip():
            warnings.warn(
                f"tool '{tool_name}' has no description (no docstring, no description=), so "
                "the model is shown only its name; add a docstring saying what it does",
                ChartWarning,
                stacklevel=2,
            )
            doc = tool_name
        return Tool(
            name=tool_name,
            description=doc.strip().splitlines()[0],
            fn=fn,
            args_model=args_model,
            retry=retry,
            needs_approval=needs_approval,
            repeatable=repeatable,
            output_cap=output_cap,
            reconcile=reconcile,
            schema=_clean_schema(args_model.model_json_schema()),
            inline=inline,
            timeout=timeout,
            retries=retries,
        )

    return wrap


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of `fn`'s parameter annotated `ToolContext`, if it has one."""
    try:
        hints = get_type_hints(fn)
    except Exception:
        return None
    return next(
        (name for name, hint in hints.items() if hint is ToolContext and name != "return"), None
    )


def asynchronous(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is a coroutine function (or an object whose `__call__` is one)."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004  (an object's async __call__)
    return call is not None and inspect.iscoroutinefunction(call)


def positive_seconds(
    where: str, seconds: float, error: type[Exception] = ChartError, what: str = "a timeout"
) -> float:
    """`seconds` as a float if it is a positive number, else `error` naming `where`."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise error(f"{where}: {what} must be a positive number of seconds, not {seconds!r}")
    return float(seconds)


def valid_tool_name(name: str) -> str:
    """`name` if providers accept it as a tool name, else the nearest name they accept
    (each run of other characters becomes `_`). Mining uses it for names from traces."""
    if TOOL_NAME.match(name):
        return name
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64] or "tool"


def _args_model(tool_name: str, fn: Callable[..., Any], *, keyed: bool) -> type[BaseModel]:
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"tool '{tool_name}': cannot read type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if (pname == KEY_PARAMETER and keyed) or hints.get(pname) is ToolContext:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool '{tool_name}': *args/**kwargs cannot be described to a model; "
                "name every parameter"
            )
        if pname not in hints:
            raise ToolDefinitionError(
                f"tool '{tool_name}': parameter '{pname}' has no type hint; annotate it"
            )
        default = ... if param.default is param.empty else param.default
        fields[pname] = (hints[pname], default)
    if keyed and KEY_PARAMETER not in sig.parameters:
        raise ToolDefinitionError(
            f"tool '{tool_name}' has retry='keyed' but no '{KEY_PARAMETER}' parameter; "
            "add one and pass it to the outside system"
        )
    model: type[BaseModel] = create_model(f"{tool_name}_args", **fields)
    return model


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    props = schema.get("properties", {})
    for prop in props.values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal strings."""
    return _CANONICAL.encode(value)


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def fingerprint(tool_name: str, arguments: dict[str, Any]) -> str:
    """Identifies a call by tool name and canonical arguments (spots repeats).

    Args:
        tool_name: The tool called.
        arguments: Its arguments as JSON values.

    Returns:
        24 hex digits of a SHA-256 over the name and the canonical JSON of the arguments.
    """
    text = "".join(_ACYCLIC(arguments, 0)) if _ACYCLIC is not None else canonical_json(arguments)
    return hashlib.sha256(f"{tool_name}\x00{text}".encode()).hexdigest()[:24]


_ACYCLIC = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, str, encode_basestring, None, ":", ",", True, False, True)
)
"""`_CANONICAL`'s C encoder made once, without the circular-reference check: for
arguments as JSON values (`Tool.validate`'s output), which hold no cycle."""


def parse_arguments(call: ToolCall) -> dict[str, Any] | str:
    """A call's arguments as a dict, or what is wrong with them (said to the model)."""
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments of '{call.name}' are not valid JSON ({exc.msg}); send a JSON object"
    if not isinstance(value, dict):
        return f"arguments of '{call.name}' must be a JSON object"
    return value


def checked(tool: Tool, call: ToolCall) -> CheckedCall | str:
    """`call`'s arguments validated by `tool` (JSON values and fingerprint), or what is
    wrong with them. The engine computes this once per call, when the call's intent is
    recorded, and hands it forward (`Step.checked`). The typed arguments a tool runs with
    are not kept: they are parsed afresh (`Tool.parse`), since a tool may change them."""
    args = parse_arguments(call)
    if isinstance(args, str):
        return args
    try:
        values = tool.validate(args)
    except ToolArgumentsError as exc:
        return str(exc)
    return CheckedCall(call=call, arguments=values, fingerprint=fingerprint(tool.name, values))


def outcome_class(value: Any) -> str | None:
    """A result's own outcome class (`hit`, `empty`): its `outcome` field or attribute, when
    that is a string. The miner labels calls by it; the event keeps it beside the text,
    which may be truncated."""
    found = value.get("outcome") if isinstance(value, Mapping) else getattr(value, "outcome", None)
    return found if isinstance(found, str) and found else None


def render_result(value: Any, cap: int) -> str:
    """A tool's return value as plain text for the transcript, cut to `cap` characters (a
    `str` subclass, such as a `StrEnum` member, becomes its plain value)."""
    if isinstance(value, str):
        text = value if type(value) is str else str.__str__(value)
    else:
        text = canonical_json(value)
    if len(text) > cap:
        return f"{text[:cap]}\n[truncated: {len(text) - cap} more characters]"
    return text
