"""A Dagster code location over the Rocky playground (examples/playground)."""
