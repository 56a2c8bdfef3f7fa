"""A reconciler killed with SIGKILL between a webhook demand's claim and the spool unlink.

The spool file is consumed only after the claim commits: killed inside the claim transaction, the file is
still there and the restarted tick runs the demand exactly once; killed after the commit and before the
unlink, the restart finds the claim and never runs the demand a second time. The driver is a real process
that kills itself (``kill -9``) at the chosen point; the restart is a reconciler on the same files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rocky_engine.schedule.spool import list_demands, spool_dir_of, write_demand
from rocky_engine.state import StateStore
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, sources, transformation

REPO = Path(__file__).resolve().parents[3]

DRIVER = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from rocky_engine.project import load_project
from rocky_engine.schedule.recovery import Recovery
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, reconciler

point = sys.argv[1]

def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)

real_submit, real_consume = ClaimRepo.submit, Recovery._consume

def submit(self, **kw):
    claimed = real_submit(self, **kw)
    if point == "in_claim_transaction" and kw["source"] == "webhook":
        die()  # the claim row is written, its transaction not committed
    return claimed

def consume(self, demand):
    if point == "before_unlink":
        die()  # the claim is committed, the spool file not yet removed
    return real_consume(self, demand)

ClaimRepo.submit, Recovery._consume = submit, consume
clock = Clock(T0)
reconciler(clock, SimChild(clock)).tick(load_project("rocky.toml", env={}))
print("survived")
"""


@pytest.mark.parametrize("point", ["in_claim_transaction", "before_unlink"])
def test_killed_between_the_webhook_claim_and_the_spool_unlink(tmp_path: Path, point: str) -> None:
    project = project_at(tmp_path, transformation("orders"), {"a.sql": "select 1 as x\n"})
    spool = spool_dir_of(project.dot_rocky)
    demand = write_demand(spool, pipeline="orders", body=b"{}", delivery_id="evt-1", now=T0)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, point, str(REPO)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert demand.path.exists(), "the spool file was consumed before its claim committed"

    clock = Clock(T0)
    child = SimChild(clock)
    out = reconciler(clock, child).tick(project)
    with StateStore.open(project.state_path(), writer=False) as store:
        claims = [c for c in ClaimRepo(store).recent(limit=100) if c.source == "webhook"]
    if point == "in_claim_transaction":
        # nothing was committed: the demand is still waiting and now runs, once
        assert [e.source for e in out.executed] == ["webhook"] and child.pipelines() == ["orders"]
        assert [(c.state, c.outcome) for c in claims] == [("completed", "success")]
        assert list_demands(spool).demands == []
    else:
        # the committed claim stands: in flight until it resolves, then the demand is a duplicate
        assert out.executed == [] and sources(out, "orders") == {"webhook": "in_flight"}
        assert len(claims) == 1 and claims[0].state == "submitted"
        clock.advance(minutes=6)  # past the stuck-claim resolver's 5 minutes: the dead owner's claim fails
        again = reconciler(clock, child).tick(project)
        assert again.executed == [] and child.pipelines() == []
        assert sources(again, "orders") == {"webhook": "dedup"}
        assert list_demands(spool).demands == []
