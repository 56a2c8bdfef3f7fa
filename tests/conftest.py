"""Shared pytest configuration: fixture plugins for the real services the tests start themselves."""

from __future__ import annotations

# A list on purpose: other fixture modules (S3, Redis, ...) are appended here.
pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.s3",
    "tests.fixtures.redis",
    "tests.fixtures.spark",
    "tests.fixtures.spark_project",
    "tests.fixtures.fsync_spy",
]
