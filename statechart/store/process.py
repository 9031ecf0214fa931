"""Who holds a lease, as the kernel knows it: so a dead holder on this machine can be told
from a live one without waiting out its time-to-live.

An identity is `boot_id/pid_namespace/pid/start_time` (start time in clock ticks since
boot, from `/proc/PID/stat`). A holder is dead for sure only when the resumer runs under
the same boot and in the same PID namespace and no live process has that pid and start
time. Any doubt (another host, another namespace, a container, an unreadable `/proc`)
answers "not known dead": taking over a live holder would run a call twice.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


GONE = ("gone", "")


def _start_time(pid: int) -> tuple[str, str] | None:
    """(state, start time) of process `pid` from `/proc/PID/stat`; `GONE` only when the
    kernel says no such process exists; None when it cannot be told (a hidden `/proc`)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return GONE
        except OSError:
            return None  # it exists, but is not ours to see
        return None  # it exists, and /proc hides it
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    return fields[0], fields[19]


@cache
def _here() -> tuple[str, str] | None:
    """This process's boot id and PID namespace, when `/proc` is this namespace's own (a
    namespace that sees another's `/proc` would read other processes' start times)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
        own = os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return None
    return (boot, namespace) if boot and own else None


def identity() -> str | None:
    """This process, as `boot/namespace/pid/start`; None where `/proc` cannot tell."""
    here = _here()
    found = _start_time(os.getpid())
    if here is None or found is None or found is GONE:
        return None
    return f"{here[0]}/{here[1]}/{os.getpid()}/{found[1]}"


def known_dead(holder: str | None) -> bool:
    """True only if the process `holder` names surely no longer runs (a zombie, killed
    and not yet reaped, runs nothing); False on any doubt."""
    here = _here()
    if not holder or here is None:
        return False
    parts = holder.split("/")
    if len(parts) != 4 or (parts[0], parts[1]) != here or not parts[2].isdigit():
        return False
    found = _start_time(int(parts[2]))
    if found is None:
        return False
    if found is GONE:
        return True
    state, start = found
    return start != parts[3] or state in ("Z", "X")
