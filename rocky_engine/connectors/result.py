"""``_rocky_result.json``: read it and check every rule of seeds/child-connectors.md "The request and the
result". Any failure fails the attempt (Rocky may start another).

1. The result file parses, and ``protocol_version`` is 0.
2. ``state.schema_version`` equals the manifest's ``state_schema_version``.
3. The serialized state (its ``value``, compact JSON as the state store keeps it) is at most 1 MiB.
4. Every path is relative, has no ``..``, and resolves (symlinks followed) inside the scratch directory.
5. Every file exists, is a regular file, and has the size in bytes.
6. Every file ends with the Parquet marker ``PAR1``, and the row count in its footer equals ``rows``.
7. The files together are at most ``output_bytes``.
8. No file changed while it was checked: each is fingerprinted first and verified after the checks
   (connectors/fingerprint.py; the runner verifies again right before the promote).

Unknown keys are ignored, so a later protocol revision can add fields without breaking this reader; a
path listed twice is refused (its rows would load twice). A result with no files is valid.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from rocky_engine.connectors.fingerprint import Fingerprint, fingerprint, verify
from rocky_engine.errors import ConnectorError
from rocky_engine.wire.connector import (
    PROTOCOL_VERSION,
    RESULT_FILE,
    ConnectorResultDocument,
    ConnectorState,
    ResultFileEntry,
)

#: The largest state a connector may save.
MAX_STATE_BYTES = 1024 * 1024
#: The largest result document read (it lists files and holds at most 1 MiB of state).
MAX_RESULT_BYTES = 64 * 1024 * 1024
PARQUET_MAGIC = b"PAR1"


class ResultError(ConnectorError):
    """A ``_rocky_result.json`` (or a file it lists) that breaks a rule of the protocol."""


@dataclass(frozen=True)
class ResultFile:
    """One checked file of the batch."""

    #: the path as the program wrote it (relative to the scratch directory)
    path: str
    #: the file it resolves to
    absolute: Path
    bytes: int
    rows: int
    #: ``(name, arrow type)`` of each column, read from the footer
    columns: tuple[tuple[str, str], ...]
    #: taken before the checks read the file; verified after them and before the promote
    fingerprint: Fingerprint


@dataclass(frozen=True)
class ConnectorResult:
    """A result that passed every check."""

    files: list[ResultFile]
    state_schema_version: int
    state_value: Any
    #: ``state_value`` serialized as it is stored
    state_json: str

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def total_rows(self) -> int:
        return sum(f.rows for f in self.files)


def serialize_state(value: Any) -> str:
    """Compact JSON, the stored (and size-checked) form of a state value."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def read_result(
    scratch: Path,
    *,
    state_schema_version: int,
    output_bytes: int,
    identity: tuple[int, int] | None = None,
) -> ConnectorResult:
    """Read and check ``<scratch>/_rocky_result.json``.

    Args:
        scratch: the attempt's scratch directory.
        state_schema_version: the manifest's.
        output_bytes: the attempt's cap.
        identity: ``(st_dev, st_ino)`` of the scratch directory when it was created; a program that
            swapped the directory for a symlink or another directory would otherwise move "inside".

    Raises:
        ResultError: the first rule the result breaks, in words.
    """
    if identity is not None:
        try:
            st = os.lstat(scratch)
        except OSError as exc:
            raise ResultError(f"the scratch directory {scratch} is gone: {exc}") from None
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != identity:
            raise ResultError(f"the scratch directory {scratch} was replaced while the program ran")
    raw = _load(scratch / RESULT_FILE)
    try:
        doc = ConnectorResultDocument.model_validate(raw)
    except ValidationError as exc:
        raise ResultError(_refusal(exc, raw, state_schema_version)) from None
    if doc.protocol_version != PROTOCOL_VERSION:
        raise ResultError(_protocol_refusal(doc.protocol_version))
    version, value, state_json = _state(doc.state, state_schema_version)
    files = _files(doc.files or [], scratch)
    total = sum(f.bytes for f in files)
    if total > output_bytes:
        raise ResultError(f"the files add up to {total} bytes, more than output_bytes ({output_bytes})")
    return ConnectorResult(files=files, state_schema_version=version, state_value=value,
                           state_json=state_json)


def _protocol_refusal(version: Any) -> str:
    return f"{RESULT_FILE} has protocol_version {json.dumps(version)}; this rocky speaks protocol 0 only"


def _refusal(exc: ValidationError, raw: dict[str, Any], expected_version: int) -> str:
    """The protocol's words for the first rule a result breaks (the checks run in the model's field
    order: protocol_version, state, files)."""
    loc = exc.errors()[0]["loc"]
    head = loc[0]
    if head == "protocol_version":
        if "protocol_version" not in raw:
            return f"{RESULT_FILE} has no protocol_version; write \"protocol_version\": 0"
        return _protocol_refusal(raw["protocol_version"])
    if head == "state":
        state = raw.get("state")
        if loc[1:] == ("schema_version",) and isinstance(state, dict) and "schema_version" in state:
            return _version_refusal(state["schema_version"], expected_version)
        return (f"{RESULT_FILE} must hold \"state\": {{\"schema_version\": {expected_version}, "
                "\"value\": ...}")
    if len(loc) == 1:
        return f"files in {RESULT_FILE} must be a list"
    index = loc[1]
    entry = raw["files"][index]
    if len(loc) == 2 or not isinstance(entry, dict):
        return f"files[{index}] must be an object {{path, bytes, rows}}"
    key = loc[2]
    if key == "path":
        return f"files[{index}].path must be a non-empty string"
    return f"files[{index}].{key} must be a non-negative integer (path {entry.get('path')!r})"


def _load(path: Path) -> dict[str, Any]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ResultError(
            f"the program exited 0 but wrote no {RESULT_FILE} in its output_dir",
            hint="write the result file last, after every Parquet file",
        ) from None
    except OSError as exc:
        raise ResultError(f"cannot read {RESULT_FILE}: {exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ResultError(f"{RESULT_FILE} is not a regular file")
    if st.st_size > MAX_RESULT_BYTES:
        raise ResultError(f"{RESULT_FILE} is {st.st_size} bytes, more than {MAX_RESULT_BYTES}")
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ResultError(f"{RESULT_FILE} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ResultError(f"{RESULT_FILE} must hold a JSON object, not {type(doc).__name__}")
    return doc


def _version_refusal(version: Any, expected_version: int) -> str:
    return (f"state.schema_version is {json.dumps(version)}, but the manifest says state_schema_version = "
            f"{expected_version}")


def _state(state: ConnectorState, expected_version: int) -> tuple[int, Any, str]:
    version = state.schema_version
    if version != expected_version:
        raise ResultError(
            _version_refusal(version, expected_version),
            hint="write state in the version the manifest declares (upgrade older state in the program)",
        )
    try:
        text = serialize_state(state.value)
    except ValueError as exc:
        raise ResultError(f"state.value cannot be stored: {exc}") from None
    size = len(text.encode("utf-8"))
    if size > MAX_STATE_BYTES:
        raise ResultError(
            f"the serialized state is {size} bytes, more than the 1 MiB ({MAX_STATE_BYTES} bytes) allowed",
            hint="keep a cursor in the state, not data",
        )
    return version, state.value, text


def _files(entries: list[ResultFileEntry], scratch: Path) -> list[ResultFile]:
    root = scratch.resolve()
    seen: set[Path] = set()
    checked: list[tuple[str, Path, int, int, Fingerprint]] = []
    for entry in entries:
        path, size, rows = entry.path, entry.bytes, entry.rows
        absolute = _inside(path, root)
        if absolute in seen:
            raise ResultError(f"{path!r} is listed twice; its rows would load twice")
        seen.add(absolute)
        try:
            print_ = fingerprint(absolute)
            actual = print_.size
            if actual != size:
                raise ResultError(f"{path!r} has {actual} bytes, but the result says {size}")
            _check_marker(path, absolute, actual)
        except OSError as exc:
            raise ResultError(f"{path!r} cannot be read: {exc}") from None
        checked.append((path, absolute, size, rows, print_))
    files = [_with_footer(*entry) for entry in checked]
    for f in files:
        verify(f.path, f.absolute, f.fingerprint, "while it was checked")
    return files


def _inside(path: str, root: Path) -> Path:
    """The file ``path`` names, refused unless it is relative, has no ``..`` and stays in ``root``."""
    if "\x00" in path:
        raise ResultError(f"path {path!r} holds a NUL byte")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ResultError(f"path {path!r} is absolute; paths are relative to output_dir")
    if ".." in pure.parts:
        raise ResultError(f"path {path!r} contains '..'; every file must be inside output_dir")
    candidate = root / pure
    try:
        resolved = candidate.resolve(strict=True)
    except FileNotFoundError:
        raise ResultError(f"{path!r} does not exist in output_dir") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ResultError(f"{path!r} cannot be resolved: {exc}") from None
    if resolved != root and root not in resolved.parents:
        raise ResultError(f"{path!r} resolves to {resolved}, outside output_dir (a symlink out of scratch)")
    if not resolved.is_file():
        raise ResultError(f"{path!r} is not a regular file")
    if resolved == root / RESULT_FILE:
        raise ResultError(f"{path!r} is the result file itself, not a Parquet file")
    return resolved


def _check_marker(path: str, absolute: Path, size: int) -> None:
    # 4-byte header + 4-byte footer length + 4-byte trailer is the smallest Parquet file there is.
    if size < 12:
        raise ResultError(f"{path!r} is {size} bytes, too small to be a Parquet file")
    with absolute.open("rb") as fh:
        fh.seek(-4, os.SEEK_END)
        tail = fh.read(4)
    if tail != PARQUET_MAGIC:
        raise ResultError(f"{path!r} is not a Parquet file (it does not end with the PAR1 marker)")


def _with_footer(path: str, absolute: Path, size: int, rows: int, print_: Fingerprint) -> ResultFile:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(absolute)
        schema = meta.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad footer
        raise ResultError(f"{path!r} has an unreadable Parquet footer: {exc}") from None
    if meta.num_rows != rows:
        raise ResultError(f"{path!r} holds {meta.num_rows} rows in its footer, but the result says {rows}")
    columns = tuple((field.name, str(field.type)) for field in schema)
    return ResultFile(path=path, absolute=absolute, bytes=size, rows=rows, columns=columns,
                      fingerprint=print_)
