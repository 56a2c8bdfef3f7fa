"""Logging to stderr: plain lines for people, JSON lines when the output format is JSON.

stdout belongs to the result document; every log line and progress display goes to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

LOGGER_NAME = "rocky"


class _JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "target": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            doc.update(fields)
        return json.dumps(doc, default=str)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def configure(json_lines: bool, level: int = logging.INFO) -> None:
    """Route the ``rocky`` logger to stderr (idempotent)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLineFormatter() if json_lines else _TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def json_lines_active() -> bool:
    """Whether the ``rocky`` logger writes JSON lines (``--output json``): then a run streams its
    ``rocky.events`` lines (``run.events``); people reading text get the end-of-run table instead."""
    return any(isinstance(h.formatter, _JsonLineFormatter) for h in logging.getLogger(LOGGER_NAME).handlers)


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)
