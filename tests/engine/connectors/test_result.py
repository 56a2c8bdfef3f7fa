"""``_rocky_result.json`` checks on real files: every rule of the seed, and the message each refusal gives."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rocky_engine.connectors.result import MAX_STATE_BYTES, ResultError, read_result

CAP = 10_000_000


def parquet(scratch: Path, name: str, rows: int = 3) -> dict[str, Any]:
    path = scratch / name
    pq.write_table(pa.table({"id": list(range(rows))}), path)
    return {"path": name, "bytes": path.stat().st_size, "rows": rows}


def result(scratch: Path, files: Any, **overrides: Any) -> None:
    doc: dict[str, Any] = {"protocol_version": 0, "files": files,
                           "state": {"schema_version": 1, "value": {"cursor": 1}}}
    doc.update(overrides)
    (scratch / "_rocky_result.json").write_text(json.dumps(doc))


def check(scratch: Path, cap: int = CAP) -> Any:
    return read_result(scratch, state_schema_version=1, output_bytes=cap)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "run-1"
    path.mkdir(mode=0o700)
    return path


def test_valid_result(scratch: Path) -> None:
    (scratch / "sub").mkdir()
    result(scratch, [parquet(scratch, "a.parquet", 3), parquet(scratch, "sub/b.parquet", 2)])
    res = check(scratch)
    assert [f.path for f in res.files] == ["a.parquet", "sub/b.parquet"]
    assert res.total_rows == 5
    assert res.files[0].columns == (("id", "int64"),)
    assert res.state_value == {"cursor": 1} and res.state_json == '{"cursor":1}'


def test_no_files_is_valid(scratch: Path) -> None:
    result(scratch, [])
    assert check(scratch).files == []


def test_symlink_inside_scratch_is_fine(scratch: Path) -> None:
    entry = parquet(scratch, "a.parquet")
    os.symlink(scratch / "a.parquet", scratch / "link.parquet")
    result(scratch, [{**entry, "path": "link.parquet"}])
    assert check(scratch).files[0].absolute == (scratch / "a.parquet").resolve()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda s: None, "wrote no _rocky_result.json"),
        (lambda s: (s / "_rocky_result.json").write_text("{not json"), "is not valid JSON"),
        (lambda s: (s / "_rocky_result.json").write_text("[]"), "must hold a JSON object, not list"),
        (lambda s: result(s, [], protocol_version=1), "has protocol_version 1; this rocky speaks protocol 0"),
        (lambda s: result(s, [], protocol_version=False), "has protocol_version false"),
        (lambda s: result(s, [], state=None), 'must hold "state": {"schema_version": 1'),
        (lambda s: result(s, [], state={"schema_version": 2, "value": {}}),
         "state.schema_version is 2, but the manifest says state_schema_version = 1"),
        (lambda s: result(s, [], state={"schema_version": 1, "value": "x" * MAX_STATE_BYTES}),
         "more than the 1 MiB (1048576 bytes) allowed"),
        (lambda s: result(s, "a.parquet"), "files in _rocky_result.json must be a list"),
        (lambda s: result(s, ["a.parquet"]), "files[0] must be an object"),
        (lambda s: result(s, [{"path": "", "bytes": 1, "rows": 1}]), "files[0].path must be a non-empty"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "rows": -1}]), "files[0].rows must be a non-neg"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "bytes": True}]), "files[0].bytes must be a non-"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "path": "../x/a.parquet"}]), "contains '..'"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "path": "sub/../a.parquet"}]), "contains '..'"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "path": str(s / "a.parquet")}]), "is absolute"),
        (lambda s: result(s, [{"path": "gone.parquet", "bytes": 1, "rows": 1}]), "does not exist in output"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "bytes": 1}]), "but the result says 1"),
        (lambda s: result(s, [{**parquet(s, "a.parquet"), "rows": 4}]),
         "holds 3 rows in its footer, but the result says 4"),
        (lambda s: result(s, [parquet(s, "a.parquet"), parquet(s, "a.parquet")]), "is listed twice"),
        (lambda s: result(s, [{"path": "_rocky_result.json", "bytes": 0, "rows": 0}]),
         "the result file itself"),
    ],
)
def test_refusals(scratch: Path, setup: Any, message: str) -> None:
    setup(scratch)
    with pytest.raises(ResultError) as err:
        check(scratch)
    assert message in str(err.value)


def test_symlink_escape(scratch: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    entry = parquet(outside, "secret.parquet")
    os.symlink(outside / "secret.parquet", scratch / "escape.parquet")
    result(scratch, [{**entry, "path": "escape.parquet"}])
    with pytest.raises(ResultError, match="outside output_dir \\(a symlink out of scratch\\)"):
        check(scratch)
    # a symlinked directory escapes too
    os.symlink(outside, scratch / "dir")
    result(scratch, [{**entry, "path": "dir/secret.parquet"}])
    with pytest.raises(ResultError, match="outside output_dir"):
        check(scratch)


def test_not_parquet(scratch: Path) -> None:
    (scratch / "a.parquet").write_text("id,name\n1,a\n2,b\n")
    result(scratch, [{"path": "a.parquet", "bytes": 16, "rows": 2}])
    with pytest.raises(ResultError, match="is not a Parquet file \\(it does not end with the PAR1 marker\\)"):
        check(scratch)
    (scratch / "b.parquet").write_bytes(b"PAR1")
    result(scratch, [{"path": "b.parquet", "bytes": 4, "rows": 0}])
    with pytest.raises(ResultError, match="too small to be a Parquet file"):
        check(scratch)
    (scratch / "c.parquet").write_bytes(b"PAR1" + b"\x00" * 20 + b"PAR1")
    result(scratch, [{"path": "c.parquet", "bytes": 28, "rows": 0}])
    with pytest.raises(ResultError, match="has an unreadable Parquet footer"):
        check(scratch)


def test_output_cap(scratch: Path) -> None:
    a, b = parquet(scratch, "a.parquet"), parquet(scratch, "b.parquet")
    result(scratch, [a, b])
    total = a["bytes"] + b["bytes"]
    assert check(scratch, cap=total).total_bytes == total
    with pytest.raises(ResultError, match=f"the files add up to {total} bytes, more than output_bytes"):
        check(scratch, cap=total - 1)


def test_state_at_exactly_one_mib_is_allowed(scratch: Path) -> None:
    result(scratch, [], state={"schema_version": 1, "value": "x" * (MAX_STATE_BYTES - 2)})
    assert len(check(scratch).state_json) == MAX_STATE_BYTES


def test_swapped_scratch_directory_is_refused(scratch: Path, tmp_path: Path) -> None:
    st = os.lstat(scratch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result(elsewhere, [parquet(elsewhere, "a.parquet")])
    scratch.rmdir()
    os.symlink(elsewhere, scratch)
    with pytest.raises(ResultError, match="was replaced while the program ran"):
        read_result(scratch, state_schema_version=1, output_bytes=CAP, identity=(st.st_dev, st.st_ino))
    from rocky_engine.connectors.scratch import remove_scratch

    assert remove_scratch(scratch) and elsewhere.exists() and not scratch.is_symlink()
