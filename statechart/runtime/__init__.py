"""The async code over the engine: the driver loop and the run API (anyio only here)."""
