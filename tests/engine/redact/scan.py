"""Scanning what rocky left behind for a secret: the whole value and every line of it of at least 8 bytes
(the redactor's floor), in text and in files (state stores, logs, incident bundles) read as bytes."""

from __future__ import annotations

from pathlib import Path

MIN_BYTES = 8

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4ZxqF2Kb5xZEwYRjN8kWb3vPq0mLrT1sQ2aHdUcXoZ7yIfGnBJe\n"
    "-----END PRIVATE KEY-----\n"
)


def pieces(secret: str) -> list[str]:
    found = [secret.strip()] + [line.strip() for line in secret.splitlines()]
    return [p for p in found if len(p.encode()) >= MIN_BYTES]


def leaks(secret: str, *texts: str | bytes, files: tuple[Path, ...] = ()) -> list[str]:
    """Every (piece, where) of ``secret`` found in ``texts`` or in the files (recursing into directories)."""
    found: list[str] = []
    blobs: list[tuple[str, bytes]] = [
        (f"text {i}", t.encode() if isinstance(t, str) else t) for i, t in enumerate(texts)
    ]
    for root in files:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        blobs += [(str(p), p.read_bytes()) for p in paths]
    for where, blob in blobs:
        for piece in pieces(secret):
            if piece.encode() in blob:
                found.append(f"{piece!r} in {where}")
    return found
