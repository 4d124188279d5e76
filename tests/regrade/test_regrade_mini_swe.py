"""mini_swe: `openenv eval --keep-state` then `openenv regrade`, end to end (a real server, real
sandboxes, `MiniSweGrader`'s hidden tests through `run_tests` in the restored repository).

- the same grader gives every episode its score again (the gold patch 1, a note beside the bug 0);
- the attacks of tests/security/test_attack_mini_swe.py, played as the agent's turns, score 0
  at the episode's end and 0 on regrade, the gold patch beside them 1 both times;
- the kept archive is the repository (its `.git` included, the session's HOME not).
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from openenv_sdk.evaluation import EpisodeLog
from openenv_sdk.regrade import StateStore
from tests.regrade.test_regrade_runs import keep_run, regrade_json, tasks

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session sandboxes need root (CI runs as root)")

MINI_SWE_TASKS = ["intervals-1", "datekit-1", "pagekit-1", "querystr-1"]


def test_the_same_grader_gives_every_mini_swe_episode_its_score_again(tmp_path: Path) -> None:
    run = keep_run(tmp_path / "mini_swe", "mini_swe", "mini_swe_act", *tasks(*MINI_SWE_TASKS), "-r", "2")
    records = EpisodeLog(run / "episodes.jsonl").load()
    original = {key: r.reward for key, r in records.items()}
    assert all(r.error is None for r in records.values())
    assert original == {**{f"{t}#0": 1.0 for t in MINI_SWE_TASKS}, **{f"{t}#1": 0.0 for t in MINI_SWE_TASKS}}
    result = regrade_json(run)
    assert result["regraded"] == len(records) == 8 and result["sessions"] == 8
    assert result["changed"] == result["failed"] == result["not_kept"] == 0
    for row in result["episodes"]:
        assert row["reward"] == original[row["key"]] and row["components"] == records[row["key"]].reward_components
        # where its time went: a session reset, the repository restored, the hidden tests run
        assert {"reset", "restore_workspace", "run_tests", "grade"} <= set(row["timings_s"])
        assert row["timings_s"]["grade"] >= row["timings_s"]["run_tests"] > 0
    assert result["server_start_s"] > 0
    store = StateStore(run)
    kept = store.load("intervals-1#0")
    assert kept is not None and kept.archive is not None
    with tarfile.open(fileobj=io.BytesIO((store.folder / kept.archive).read_bytes()), mode="r:gz") as tar:
        names = set(tar.getnames())
    assert {"intervals/ops.py", "tests/test_ops.py", ".git/HEAD"} <= names  # the repository, as the grader read it
    assert not any(name.startswith(("home/", "repo/")) for name in names)  # the repository itself, not the session root
    note = store.load("intervals-1#1")
    assert note is not None and note.archive is not None
    with tarfile.open(fileobj=io.BytesIO((store.folder / note.archive).read_bytes()), mode="r:gz") as tar:
        assert tar.extractfile("NOTES.md").read() == b"looked, changed nothing\n"  # type: ignore[union-attr]


def test_mini_swe_attacks_score_zero_on_regrade(tmp_path: Path) -> None:
    """Forged reports and patched runners at import, fake pass lines, lying values, conftest.py
    and pytest configuration planted, startup files, a test edited or deleted, the fix as bytecode
    only: 0 at the episode's end and 0 on regrade, where the repository restored from the archive
    is graded in a fresh session; the gold patch (the last attempt) 1 in both."""
    from tests.regrade.policies import mini_swe_attacks

    n = len(mini_swe_attacks())
    run = keep_run(tmp_path / "attacks", "mini_swe", "mini_swe_attack_act", "--task", "intervals-1", "-r", str(n + 1))
    records = EpisodeLog(run / "episodes.jsonl").load()
    original = {k: r.reward for k, r in records.items()}
    assert original == {**{f"intervals-1#{i}": 0.0 for i in range(n)}, f"intervals-1#{n}": 1.0}
    result = regrade_json(run)
    assert {row["key"]: row["reward"] for row in result["episodes"]} == original
    assert result["regraded"] == n + 1 and result["sessions"] == n + 1
    # each attack is refused on regrade for the reason it was refused at first (the same evidence)
    for row in result["episodes"]:
        assert row["components"] == records[row["key"]].reward_components
