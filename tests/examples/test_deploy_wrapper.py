"""examples/deploy: the exit-code routing wrapper against real runs, and the shape of the templates."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.hooks.kit import BAD_SQL, GOOD_SQL, make_project

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy"
WRAPPER = DEPLOY / "rocky-run.sh"


def _bin(tmp_path: Path) -> tuple[Path, Path]:
    """A ``rocky`` shim running this interpreter's engine, and a notifier that records its calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "rocky"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m rocky_engine.cli.main "$@"\n')
    shim.chmod(0o755)
    notifier = bindir / "notify"
    notifier.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$1" "$2" >> {tmp_path / "notified.txt"}\n')
    notifier.chmod(0o755)
    return shim, notifier


def _wrap(tmp_path: Path, project: Path, *args: str, rocky_bin: Path | None = None,
          extra_env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    shim, notifier = _bin(tmp_path) if not (tmp_path / "bin").exists() else (
        tmp_path / "bin" / "rocky", tmp_path / "bin" / "notify")
    log = tmp_path / "logs" / "analytics.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    env.update({
        "ROCKY_PROJECT_DIR": str(project),
        "ROCKY_RUN_LOG": str(log),
        "ROCKY_BIN": str(rocky_bin or shim),
        "ROCKY_NOTIFY_CMD": str(notifier),
        **(extra_env or {}),
    })
    proc = subprocess.run(["bash", str(WRAPPER), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    notified = tmp_path / "notified.txt"
    calls = notified.read_text().splitlines() if notified.exists() else []
    return proc.returncode, calls, log.read_text() if log.exists() else ""


def test_success_stays_quiet(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"good": GOOD_SQL}).parent
    code, calls, log = _wrap(tmp_path, project)
    assert code == 0 and calls == []
    assert '"status": "Success"' in log


def test_partial_failure_goes_to_the_partial_channel(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"good": GOOD_SQL, "bad": BAD_SQL}).parent
    code, calls, log = _wrap(tmp_path, project)
    assert code == 2
    assert calls == ["#data-partial|Rocky partial success (exit 2): a model or a check failed, run continued"]
    assert '"status": "PartialFailure"' in log and "no_such_column" in log


def test_total_failure_pages_the_oncall(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"bad": BAD_SQL}).parent
    code, calls, log = _wrap(tmp_path, project)
    assert code == 1
    assert calls == ["#data-oncall|Rocky run FAILED (exit 1)"]
    assert '"status": "Failure"' in log


def test_a_config_error_pages_the_oncall_and_arguments_reach_rocky_run(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"good": GOOD_SQL}).parent
    code, calls, log = _wrap(tmp_path, project, "--pipeline", "nope")
    assert code == 1
    assert calls == ["#data-oncall|Rocky run FAILED (exit 1)"]
    assert "unknown pipeline 'nope'" in log


def test_an_env_file_supplies_the_secrets_the_config_references(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"good": GOOD_SQL}, extra_toml="""
        [[hook.on_pipeline_complete]]
        command = "echo $HOOK_TOKEN > token.txt"
        env = { HOOK_TOKEN = "${DEPLOY_TEST_TOKEN}" }
        """).parent
    code, calls, log = _wrap(tmp_path, project)
    assert code == 1 and "DEPLOY_TEST_TOKEN is not set" in log
    env_file = tmp_path / "analytics.env"
    env_file.write_text("DEPLOY_TEST_TOKEN=from-the-env-file\n")
    (tmp_path / "notified.txt").unlink()
    code, calls, _ = _wrap(tmp_path, project, extra_env={"ROCKY_ENV_FILE": str(env_file)})
    assert code == 0 and calls == []
    assert (project / "token.txt").read_text().strip() == "from-the-env-file"


def test_interrupted_is_informational(tmp_path: Path) -> None:
    _bin(tmp_path)
    fake = tmp_path / "bin" / "rocky-interrupted"
    fake.write_text("#!/bin/sh\necho '{\"interrupted\": true}'\nexit 130\n")
    fake.chmod(0o755)
    code, calls, _ = _wrap(tmp_path, tmp_path, rocky_bin=fake)
    assert code == 130 and calls == []


def test_a_missing_project_directory_pages(tmp_path: Path) -> None:
    code, calls, _ = _wrap(tmp_path, tmp_path / "nowhere")
    assert code == 1
    assert calls == [f"#data-oncall|Rocky run FAILED: cannot cd to {tmp_path / 'nowhere'}"]


def test_without_a_notifier_the_message_goes_to_stderr(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"bad": BAD_SQL}).parent
    shim, _ = _bin(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_") and k != "SLACK_WEBHOOK_URL"}
    env.update({"ROCKY_PROJECT_DIR": str(project), "ROCKY_RUN_LOG": str(tmp_path / "x.log"),
                "ROCKY_BIN": str(shim)})
    proc = subprocess.run(["bash", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 1
    assert proc.stderr == "rocky-run.sh [#data-oncall] Rocky run FAILED (exit 1)\n"


# --- the templates --------------------------------------------------------------------------------------


def test_the_cron_line_guards_with_flock() -> None:
    lines = [line for line in (DEPLOY / "cron" / "rocky").read_text().splitlines()
             if line and not line.startswith("#") and "=" not in line.split()[0]]
    assert lines == ["0 3 * * * dataeng flock -n /var/lock/rocky-analytics.lock /srv/analytics/rocky-run.sh"]


def _unit(name: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (DEPLOY / "systemd" / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_systemd_units() -> None:
    run = _unit("rocky-analytics.service")
    assert run["Type"] == "oneshot" and run["SuccessExitStatus"] == "2"
    assert run["ExecStartPre"].endswith("rocky doctor") and run["ExecStart"].endswith("rocky-run.sh")
    assert run["OnFailure"] == "rocky-analytics-failed@%n.service"
    assert (DEPLOY / "systemd" / "rocky-analytics-failed@.service").exists()
    assert _unit("rocky-analytics.timer")["Persistent"] == "true"
    tick = _unit("rocky-tick.service")
    assert tick["ExecStart"].endswith("rocky tick --output json") and tick["SuccessExitStatus"] == "2"
    assert _unit("rocky-tick.timer")["OnCalendar"] == "*:0/1"
    serve = _unit("rocky-serve.service")
    match = re.search(r"--drain-timeout-seconds (\d+)", serve["ExecStart"])
    assert match is not None
    drain = int(match.group(1))
    assert "rocky serve --scheduler" in serve["ExecStart"]
    assert int(serve["TimeoutStopSec"]) > drain + 60
    assert serve["KillMode"] == "mixed"


def test_github_workflow_keys_off_rockys_own_exit_code() -> None:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((DEPLOY / "github" / "rocky-nightly.yml").read_text())
    steps = {s.get("name"): s for s in doc["jobs"]["run"]["steps"]}
    assert "${PIPESTATUS[0]}" in steps["Run pipeline"]["run"]
    classify = steps["Classify outcome"]
    assert classify["if"] == "always()"
    assert '2)   echo "::warning::' in classify["run"]
    assert '*)   echo "::error::Run failed."; exit 1' in classify["run"]
    assert doc[True]["schedule"] == [{"cron": "0 3 * * *"}]  # YAML 1.1 reads the key `on` as True
    ci = yaml.safe_load((DEPLOY / "github" / "rocky-ci.yml").read_text())
    assert "jq '.exit_code'" in ci["jobs"]["ci"]["steps"][-1]["run"]


def test_kubernetes_single_replica_recreate_on_a_pvc() -> None:
    yaml = pytest.importorskip("yaml")
    pvc = yaml.safe_load((DEPLOY / "kubernetes" / "pvc.yaml").read_text())
    claim = pvc["metadata"]["name"]
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "deployment.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "serve" in args and "--scheduler" in args
    drain = int(args[args.index("--drain-timeout-seconds") + 1])
    assert pod["terminationGracePeriodSeconds"] > drain + 60
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
    cron = yaml.safe_load((DEPLOY / "kubernetes" / "cronjob.yaml").read_text())
    assert cron["kind"] == "CronJob" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    job_pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "tick" in job_pod["containers"][0]["args"]
    assert job_pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim


def test_the_wrapper_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(WRAPPER)], check=False).returncode == 0
    assert subprocess.run(["bash", "-n", str(DEPLOY / "send-brief.sh")], check=False).returncode == 0
    assert os.access(WRAPPER, os.X_OK)
