"""What the database stores decide alike: when a running run's snapshot is written behind
its event, and the errors that say why a write was refused."""

from __future__ import annotations

from statechart.errors import ConflictError, LeaseHeldError, LeaseLostError
from statechart.records.run import Step
from statechart.store.base import Lease


def written_behind(
    step: Step, lease: Lease | None, status: str, snapshot_seq: int, every: int
) -> bool:
    """Whether `step` leaves the runs row as it is: a leased, non-base step that changes
    no status and no timer (a worker finds due timers by the row), fewer than `every`
    events after the stored snapshot."""
    return (
        lease is not None
        and not step.base
        and step.run.status == status
        and step.event.seq - snapshot_seq < every
        and not (step.run.wake is not None and (step.event.entered or step.event.exited))
    )


def lease_lost(lease: Lease, holder: str | None, *, expired: bool = True) -> LeaseLostError:
    """A driver's write refused: another holder (or nobody) has the run's lease."""
    why = " (it expired)" if expired else ""
    return LeaseLostError(
        f"driver {lease.holder} lost the lease of run {lease.run_id} to "
        f"{holder or 'nobody'}{why}; stop driving it"
    )


def not_next(run_id: str, seq: int, wanted: int) -> ConflictError:
    """An append refused: the run is at `seq`, not at the one before `wanted`."""
    return ConflictError(
        f"run {run_id} is at seq {seq}, not {wanted - 1}: another writer advanced it; "
        "reload the run"
    )


def event_exists(run_id: str, seq: int) -> ConflictError:
    """An append refused: the run already has an event at `seq`."""
    return ConflictError(f"run {run_id} already has event {seq}; reload the run")


def run_exists(run_id: str) -> ConflictError:
    """A create refused: the run id is taken."""
    return ConflictError(f"run {run_id} already exists; choose another run id")


def lease_held(run_id: str, holder: str, expires_in: float) -> LeaseHeldError:
    """An acquisition refused: a live lease is held."""
    return LeaseHeldError(
        f"run {run_id} is being driven by {holder} (lease expires in {expires_in:.1f} s); "
        "wait for it, or cancel the run"
    )
