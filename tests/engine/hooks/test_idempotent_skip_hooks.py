"""A run skipped by its idempotency key fires no hook (CONTRACT section 3: no run record, no hooks): a
command hook and a webhook are configured, the first run fires both, the skipped rerun neither."""

from __future__ import annotations

from pathlib import Path

from tests.engine.hooks.kit import make_project, receiver, run_in_process


def test_an_idempotent_skip_fires_no_hook(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    # One webhook only: each delivery builds an HTTP client (~0.2 s); the command hooks cover the rest.
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = \'echo "$ROCKY_EVENT" >> "{log}"\'\n'
        for event in ("pipeline_start", "pipeline_complete")
    )
    with receiver() as rx:
        hooks += f'\n[hook.webhooks.on_pipeline_complete]\nurl = "{rx.url}"\n'
        config = make_project(tmp_path, extra_toml=hooks)
        first = run_in_process(config, idempotency_key="nightly-2026-05-02")
        assert first.status == "Success"
        assert log.read_text().split() == ["pipeline_start", "pipeline_complete"]
        assert len(rx.requests) == 1
        log.unlink()

        second = run_in_process(config, idempotency_key="nightly-2026-05-02")
        assert second.status == "SkippedIdempotent"
        assert not log.exists(), log.read_text()
        assert len(rx.requests) == 1
