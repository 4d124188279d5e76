"""`openenv eval --keep-state` then `openenv regrade`, end to end: real servers on real ports,
real sandboxes, the environments' own graders.

- the same grader gives every episode its score again, over runs of wordle, terminal and coding
  with both rewards in them;
- a changed grader gives a per-task diff (table and JSON);
- the forgeries of tests/security score 0 on regrade as they did when first graded, while the
  reference solution beside them scores 1;
- what the run folder holds is checked: a tampered archive, a missing state, a workspace over
  the limit each give a typed failure, never a reward.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import ServerError
from openenv_sdk.evaluation import EpisodeLog
from openenv_sdk.providers import LocalProcessProvider
from openenv_sdk.regrade import STATE_DIR, StateStore

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session sandboxes need root (CI runs as root)")

ENVS = Path(__file__).resolve().parents[2] / "environments"
TERMINAL_TASKS = ["count_log_files", "csv2json", "crlf_to_lf", "greet_script", "git_revert", "fix_fibonacci"]
CODING_TASKS = ["fizzbuzz", "anagrams", "caesar", "chunk"]


def client_of(owner: GenericEnvClient) -> GenericEnvClient:
    """Another session of the server `owner` started."""
    token = getattr(owner.provider, "orchestrator_token", None)
    assert owner.base_url is not None
    return GenericEnvClient(owner.base_url, orchestrator_token=token, timeout_s=90)


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def keep_run(out: Path, env: str, policy: str, *args: str) -> Path:
    result = cli("eval", str(ENVS / env), "--policy", f"scripted:tests.regrade.policies:{policy}", "-o", str(out),
                 "--keep-state", "-c", "4", "--format", "quiet", *args)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def regrade_json(run: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = cli("regrade", str(run), "--json", *args)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def tasks(*ids: str) -> list[str]:
    return [arg for task_id in ids for arg in ("--task", task_id)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("runs")
    yield {
        "wordle": keep_run(root / "wordle", "wordle", "wordle_act", "-n", "6", "-r", "2"),
        "terminal": keep_run(root / "terminal", "terminal", "terminal_act", *tasks(*TERMINAL_TASKS), "-r", "2"),
        "coding": keep_run(root / "coding", "coding", "coding_act", *tasks(*CODING_TASKS), "-r", "2"),
    }


@pytest.mark.parametrize("env", ["wordle", "terminal", "coding"])
def test_the_same_grader_gives_every_episode_its_score_again(runs: dict[str, Path], env: str) -> None:
    run = runs[env]
    records = EpisodeLog(run / "episodes.jsonl").load()
    rewards = {r.reward for r in records.values()}
    assert len(rewards) >= 2 and all(r.error is None for r in records.values())  # both outcomes, all graded
    result = regrade_json(run)
    assert result["regraded"] == len(records) >= 8
    assert result["changed"] == result["failed"] == result["not_kept"] == 0
    for row in result["episodes"]:
        original = records[row["key"]]
        assert row["status"] == "regraded" and row["reward"] == original.reward, row
        assert row["components"] == original.reward_components
    archives = list((run / STATE_DIR).glob("*.tar.gz"))
    if env == "wordle":  # its grader reads the state alone: no server, no archive
        assert result["sessions"] == 0 and archives == []
    else:  # one fresh session per episode, its workspace restored from the archive
        assert result["sessions"] == len(records) and len(archives) == len(records)
    assert json.loads((run / "regrade.json").read_text())["regraded"] == len(records)


def test_a_changed_grader_gives_a_per_task_diff(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["wordle"]
    out = tmp_path / "diff.json"
    human = cli("regrade", str(run), "--grader", "tests.regrade.graders:SolvedOnly", "-o", str(out))
    assert human.exit_code == 0, human.output
    assert "changed" in human.stdout and "mean then" in human.stdout and "mean now" in human.stdout
    result = json.loads(out.read_text())
    records = EpisodeLog(run / "episodes.jsonl").load()
    wins = [k for k, r in records.items() if r.passed]
    expected = {key: (1.0 if key in wins else 0.0) for key in records}
    assert wins and {row["key"]: row["reward"] for row in result["episodes"]} == expected
    assert result["changed"] == sum(records[k].reward != v for k, v in expected.items()) >= len(wins)  # a win: 1.7 -> 1.0
    by_task = {t["task_id"]: t for t in result["tasks"]}
    assert set(by_task) == {r.task_id for r in records.values()}
    for task in by_task.values():
        assert task["regraded"] == 2 and task["regraded_mean"] == 0.5 and task["original_mean"] > 0.5


def test_a_changed_terminal_grader_reads_the_restored_workspace(runs: dict[str, Path]) -> None:
    result = regrade_json(runs["terminal"], "--grader", "tests.regrade.graders:CountLogsStrict")
    changed = {row["key"] for row in result["episodes"] if row["reward"] != row["original"]}
    assert changed == {"count_log_files#0"}  # the one solved episode of that task now misses REVIEWED
    diff = {t["task_id"]: t for t in result["tasks"]}["count_log_files"]
    assert (diff["changed"], diff["original_mean"], diff["regraded_mean"]) == (1, 0.5, 0.0)


def test_forged_terminal_episodes_score_zero_on_regrade(tmp_path: Path) -> None:
    """Fake PASS lines from the program the check runs, git hooks/fsmonitor/pager that would put
    deleted files back, the forcer (ptrace, /proc/pid/mem, kill, a daemon) as the checked program
    and in every git trap, reward files: 0 at the episode's end and 0 on regrade; the reference
    solution (attempt 1) scores 1 in both."""
    attacks = ["greet_script", "git_init_commit", "stats_py", "git_revert", "count_log_files"]
    run = keep_run(tmp_path / "attacks", "terminal", "terminal_attack_act", *tasks(*attacks), "-r", "2")
    original = {k: r.reward for k, r in EpisodeLog(run / "episodes.jsonl").load().items()}
    assert original == {**{f"{t}#0": 0.0 for t in attacks}, **{f"{t}#1": 1.0 for t in attacks}}
    result = regrade_json(run)
    assert {row["key"]: row["reward"] for row in result["episodes"]} == original
    assert result["regraded"] == 10


def test_forged_coding_episodes_score_zero_on_regrade(tmp_path: Path) -> None:
    """Each forgery and planted file of tests/security/test_attack_coding.py (pytest patched,
    exits at import, fake pass lines, a forged report, conftest.py/pytest.ini/.pth/... planted):
    0 then and on regrade; the reference (the last attempt) 1 in both."""
    from tests.regrade.policies import coding_attacks

    n = len(coding_attacks())
    run = keep_run(tmp_path / "attacks", "coding", "coding_attack_act", "--task", "fizzbuzz", "-r", str(n + 1))
    original = {k: r.reward for k, r in EpisodeLog(run / "episodes.jsonl").load().items()}
    assert original == {**{f"fizzbuzz#{i}": 0.0 for i in range(n)}, f"fizzbuzz#{n}": 1.0}
    result = regrade_json(run)
    assert {row["key"]: row["reward"] for row in result["episodes"]} == original
    assert result["regraded"] == n + 1 and result["sessions"] == n + 1


def test_a_tampered_or_missing_state_is_a_failure_never_a_reward(runs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(runs["terminal"], run)
    store = StateStore(run)
    kept = store.load("csv2json#0")
    assert kept is not None and kept.archive is not None
    (store.folder / kept.archive).write_bytes(gzip.compress(b"other"))  # not the archive that was kept
    missing = store.load("csv2json#1")
    assert missing is not None
    for path in store.folder.iterdir():
        if path.suffix == ".json" and path.name != "run.json" and json.loads(path.read_text())["key"] == "csv2json#1":
            path.unlink()
    result = regrade_json(run, code=1)
    rows = {row["key"]: row for row in result["episodes"]}
    assert rows["csv2json#0"]["status"] == "failed" and "sha256 differs" in rows["csv2json#0"]["error"]
    assert rows["csv2json#0"]["reward"] is None
    assert rows["csv2json#1"]["status"] == "not_kept" and rows["csv2json#1"]["reward"] is None
    assert result["regraded"] == len(rows) - 2


def test_without_keep_state_nothing_is_kept_and_regrade_says_how(tmp_path: Path) -> None:
    out = tmp_path / "plain"
    result = cli("eval", str(ENVS / "wordle"), "--policy", "scripted:tests.regrade.policies:wordle_act", "-n", "1",
                 "-o", str(out), "--format", "quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (out / STATE_DIR).exists()
    refused = cli("regrade", str(out))
    assert refused.exit_code == 1
    assert "holds no kept state" in refused.output and "--keep-state" in refused.output


def test_a_workspace_over_the_limit_is_not_kept_and_the_grade_stands(tmp_path: Path) -> None:
    run = keep_run(tmp_path / "big", "coding", "coding_big_act", "--task", "fizzbuzz", "--max-state-bytes", "4096")
    record = next(iter(EpisodeLog(run / "episodes.jsonl").load().values()))
    assert record.error is None and record.reward == 1.0  # keeping never changes a grade
    kept = StateStore(run).load(record.key)
    assert kept is not None and kept.archive is None and "max_archive_bytes" in (kept.error or "")
    result = regrade_json(run, code=1)
    assert result["not_kept"] == 1 and result["episodes"][0]["reward"] is None


def _archive(build: Any) -> str:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        build(tar)
    return base64.b64encode(raw.getvalue()).decode()


def _member(tar: tarfile.TarFile, name: str, *, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


@pytest.fixture(scope="module")
def terminal_server() -> Iterator[GenericEnvClient]:
    provider = LocalProcessProvider(ENVS / "terminal", startup_timeout_s=120)
    with GenericEnvClient(provider=provider, timeout_s=90) as owner:
        owner.connect()
        yield owner


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda tar: _member(tar, "../escaped"), "outside the workspace"),
        (lambda tar: (_member(tar, "l", kind=tarfile.SYMTYPE, link="/etc"), _member(tar, "l/cron.d/x")), "through the link"),
        (lambda tar: _member(tar, "dev", kind=tarfile.CHRTYPE), "device or special"),
    ],
    ids=["climbs-out", "through-a-symlink", "device"],
)
def test_the_server_refuses_a_hostile_archive_and_keeps_nothing_of_it(
    terminal_server: GenericEnvClient, build: Any, match: str
) -> None:
    """restore_workspace is orchestrator-only; even there the archive is treated as the agent's."""
    with client_of(terminal_server) as client:
        client.reset(task_id="csv2json")
        with pytest.raises(ServerError, match=match):
            client.call("restore_workspace", archive=_archive(build))
        listing = client.call("run_checks", files={"check.sh": "true"}, command="ls -A; ls /etc/cron.d", timeout_s=30.0)
        assert "escaped" not in listing["output"] and "\nx\n" not in listing["output"]
        tools = {t.name for t in client.list_tools()}
        assert not {"restore_workspace", "snapshot_workspace"} & tools  # never the agent's


def test_collect_keeps_state_too(tmp_path: Path) -> None:
    out = tmp_path / "collected"
    result = cli("collect", str(ENVS / "wordle"), "--policy", "scripted:tests.regrade.policies:wordle_act", "-n", "2",
                 "-r", "2", "-o", str(out), "--keep-state", "--format", "quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    records = EpisodeLog(out / "episodes.jsonl").load()
    regraded = regrade_json(out)
    assert {row["key"]: row["reward"] for row in regraded["episodes"]} == {k: r.reward for k, r in records.items()}
    assert regraded["regraded"] == 4


def test_keeping_an_agents_workspace_follows_nothing_and_bounds_it(terminal_server: GenericEnvClient) -> None:
    """The agent leaves a link to / and a FIFO (kept as such, nothing read through them), then a
    sparse 100 MiB file: over the unpacked limit, refused at once with the limit named."""
    with client_of(terminal_server) as client:
        client.reset(task_id="csv2json")
        out = client.call_tool("bash", command="ln -s / rootlink && mkfifo pipe && echo made")
        assert "made" in out.content[0].text
        archive = base64.b64decode(client.call("snapshot_workspace")["archive"])
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            members = {m.name: m for m in tar.getmembers()}
        assert members["rootlink"].issym() and members["rootlink"].linkname == "/"
        assert members["pipe"].isfifo() and not any(name.startswith("rootlink/") for name in members)
        client.call_tool("bash", command="truncate -s 100M big")
        with pytest.raises(ServerError, match=r"over 64 MiB \(max_unpacked_bytes\)"):
            client.call("snapshot_workspace")


def test_a_run_against_a_url_regrades_against_it_with_its_token(terminal_server: GenericEnvClient, tmp_path: Path) -> None:
    """The token is never kept with the run: regrade takes it again (--env-token)."""
    token = getattr(terminal_server.provider, "orchestrator_token", None)
    assert token and terminal_server.base_url
    out = tmp_path / "url"
    auth = ("--env-token", token)
    result = cli("eval", terminal_server.base_url, "--grader", str(ENVS / "terminal"), *auth, "--policy",
                 "scripted:tests.regrade.policies:terminal_act", "--task", "csv2json", "-r", "2", "-o", str(out),
                 "--keep-state", "--format", "quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert token not in (out / STATE_DIR / "run.json").read_text()
    original = {k: r.reward for k, r in EpisodeLog(out / "episodes.jsonl").load().items()}
    assert original == {"csv2json#0": 1.0, "csv2json#1": 0.0}
    assert cli("regrade", str(out), "--json").exit_code == 1  # no token: the server refuses the sessions
    regraded = regrade_json(out, *auth)
    assert {row["key"]: row["reward"] for row in regraded["episodes"]} == original
