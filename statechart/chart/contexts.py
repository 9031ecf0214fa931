"""The contexts of a chart's levels: a sub-chart shares the context around it, or runs on
its own joined by `input=`/`output=` ports. Checked when a chart is built (ports) and
when it is compiled to run (what each level shares)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from statechart.errors import FieldTypeError, UndeclaredFieldError

if TYPE_CHECKING:
    from statechart.chart.chart import Chart, State


def check_ports(chart: Chart, s: State, child: Chart, where: str) -> None:
    """Field-to-field ports name fields that exist on their side and have identical type
    annotations; every required child field is filled on entry."""
    parent_t, child_t = chart.context, child.context
    sides = (("input", s.input, child_t, parent_t), ("output", s.output, parent_t, child_t))
    for port, mapping, to_t, from_t in sides:
        if mapping is None or callable(mapping):
            continue
        for to_field, from_field in mapping.items():
            for field, owner in ((to_field, to_t), (from_field, from_t)):
                if field not in owner.model_fields:
                    raise UndeclaredFieldError(
                        f"{where}: {port} maps '{to_field}' <- '{from_field}', but "
                        f"{owner.__name__} has no field '{field}'; name one of "
                        f"{', '.join(owner.model_fields) or '(none)'}"
                    )
            to_a = to_t.model_fields[to_field].annotation
            from_a = from_t.model_fields[from_field].annotation
            if to_a != from_a:
                raise FieldTypeError(
                    f"{where}: {port} maps {to_t.__name__}.{to_field} ({_shown(to_a)}) <- "
                    f"{from_t.__name__}.{from_field} ({_shown(from_a)}); the types differ, "
                    f"so give {port}= a function that converts"
                )
    if not callable(s.input):
        filled = set(s.input or {})
        missing = [
            n for n, info in child_t.model_fields.items() if info.is_required() and n not in filled
        ]
        if missing:
            raise UndeclaredFieldError(
                f"{where}: sub-chart '{child.name}' requires {child_t.__name__}."
                f"{missing[0]}, which input= does not fill; map it from a field of "
                f"{parent_t.__name__} or give it a default"
            )


def _shown(annotation: object) -> str:
    """A type as it is written: `int`, `str | None`, `Literal['a', 'b']`."""
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return repr(annotation).replace("typing.", "").replace("NoneType", "None")


def check_contexts(chart: Chart, root: type[BaseModel]) -> None:
    """A sub-chart without ports shares the context of the level around it (`root`: the
    root's type, or a ported sub-chart's own): it uses fields of it, typed alike."""
    for name, child in chart.children.items():
        host, _, region = name.partition(".")
        state = chart.state_map[host]
        if region and state.kind == "map" and region != "0":
            continue  # every instance runs the same sub-chart: checked once
        if region:
            state = next(r for r in state.regions if r.name == region)
        if state.ported:
            check_contexts(child, child.context)
            continue
        fields = child.context.model_fields
        missing = sorted(set(fields) - set(root.model_fields))
        if missing:
            raise UndeclaredFieldError(
                f"sub-chart '{child.name}' (state '{name}') uses context field(s) "
                f"{', '.join(missing)} that context {root.__name__} around it lacks; "
                "declare them there, or give the state input=/output= ports"
            )
        for field, info in fields.items():
            if info.annotation != root.model_fields[field].annotation:
                raise FieldTypeError(
                    f"sub-chart '{child.name}' (state '{name}') types context field '{field}' "
                    f"as {_shown(info.annotation)}, the context around it as "
                    f"{_shown(root.model_fields[field].annotation)}; declare it with the same "
                    "type"
                )
        check_contexts(child, root)
