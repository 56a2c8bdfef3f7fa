"""Argument parsing and one module per command; no business logic lives here."""
