"""Operator commands' logic (history, state, doctor, brief): read the project and build typed results."""
