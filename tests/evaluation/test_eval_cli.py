"""`openenv eval` end to end: a scripted policy on a real OpenAI-compatible server plays Wordle
(served on a real port, or from its folder by `openenv serve`), graded by Wordle's own grader."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.evaluation import EpisodeLog, EpisodeRecord
from tests.evaluation.policy_server import WORDLE_DIR, answer

WIN = 1.7  # WordleGrader: solved (1.0) + 0.5 x speed (1.0 for one guess) + 0.2 x greens (1.0)


def run_eval(*args: str) -> Any:
    return CliRunner().invoke(app, ["eval", *args], env={"COLUMNS": "200"})


def summary_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def records_of(out: Path) -> list[EpisodeRecord]:
    return list(EpisodeLog(out / "episodes.jsonl").load().values())


def test_a_winning_policy_is_graded_by_the_grader_and_sees_the_tools(
    policy_server: Any, wordle_url: str, tmp_path: Path
) -> None:
    url, seen = policy_server
    out = tmp_path / "win"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "winner",
                      "--api-key", "sk-test", "-n", "3", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    assert (summary["env"], summary["split"], summary["tasks"], summary["episodes"]) == ("wordle", "test", 3, 3)
    assert summary["mean_reward"] == pytest.approx(WIN)
    assert summary["pass_at_k"] == {"1": 1.0}
    records = sorted(records_of(out), key=lambda r: r.key)
    assert [r.task_id for r in records] == ["1000", "1001", "1002"]  # the test split's first three
    for record in records:
        assert record.reward_components == {"solved": 1.0, "speed": 1.0, "greens": 1.0}
        assert record.passed is True and record.error is None and record.stop_reason == "no_tool_calls"
        assert record.messages[3] == {"role": "tool", "tool_call_id": "call_0",
                                      "content": f"Solved in 1!\n{answer(record.task_id).upper()} GGGGG"}  # fmt: skip
        assert (record.turns, record.tool_calls, record.prompt_tokens) == (2, 1, 40 + 50)
    first = next(s for s in seen if s["episode"] == "1000#0")
    assert first["auth"] == "Bearer sk-test"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["guess"]
    assert first["body"]["tools"][0]["function"]["parameters"]["required"] == ["word"]
    assert [m["role"] for m in first["body"]["messages"]] == ["system", "user"]
    assert first["body"]["messages"][1]["content"].startswith("Guess the 5-letter word in 6 tries.")
    assert "mean reward 1.700" in result.output and "pass@1 1.000" in result.output
    report = (out / "report.md").read_text()
    assert "| pass@1 | 1.000 |" in report and "| 1001 | test | 1 | 1 | 0 | 0 | 1.700 | 1.000 |" in report


def test_a_losing_policy_gets_zero(policy_server: Any, wordle_url: str, tmp_path: Path) -> None:
    url, _ = policy_server
    out = tmp_path / "lose"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "loser",
                      "--task", "7", "--task", "8", "-r", "2", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    assert summary["mean_reward"] == 0.0 and summary["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert summary["split"] is None and [t["task_id"] for t in summary["per_task"]] == ["7", "8"]
    assert all(r.reward == 0.0 and r.passed is False for r in records_of(out))


def test_pass_at_k_is_the_unbiased_estimator_over_tasks(policy_server: Any, wordle_url: str, tmp_path: Path) -> None:
    """`mod3` wins attempts below task_id % 3: of 4 attempts, task 1000 passes 1, 1001 passes 2, 1002 none."""
    url, _ = policy_server
    out = tmp_path / "mod3"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "mod3",
                      "-n", "3", "-r", "4", "-c", "5", "-o", str(out), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    per_task = {t["task_id"]: t for t in summary["per_task"]}
    assert {k: (t["graded"], t["passed"]) for k, t in per_task.items()} == {"1000": (4, 1), "1001": (4, 2), "1002": (4, 0)}
    # 1 - C(n-c, k) / C(n, k), n = 4
    assert per_task["1000"]["pass_at_k"] == {"1": 0.25, "2": 0.5, "4": 1.0}
    assert per_task["1001"]["pass_at_k"] == pytest.approx({"1": 0.5, "2": 1 - 1 / 6, "4": 1.0})
    assert per_task["1002"]["pass_at_k"] == {"1": 0.0, "2": 0.0, "4": 0.0}
    assert summary["pass_at_k"] == pytest.approx({"1": 0.25, "2": (0.5 + 5 / 6) / 3, "4": 2 / 3})
    assert summary["mean_reward"] == pytest.approx(3 * WIN / 12)
    assert summary["files"][0] == str(out / "episodes.jsonl")


def test_an_environment_folder_is_served_and_graded_by_its_own_grader(policy_server: Any, tmp_path: Path) -> None:
    url, seen = policy_server
    out = tmp_path / "folder"
    result = run_eval(str(WORDLE_DIR), "--base-url", url, "--model", "mod3", "--split", "train", "-n", "2",
                      "-r", "3", "-k", "1", "-k", "3", "-o", str(out), "--format", "quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output == ""
    summary = summary_of(out)
    assert (summary["env"], summary["split"]) == ("wordle", "train")
    # tasks 0 and 1: 0 % 3 = 0 wins, 1 % 3 = 1 win of 3
    assert {t["task_id"]: t["passed"] for t in summary["per_task"]} == {"0": 0, "1": 1}
    assert summary["pass_at_k"] == pytest.approx({"1": (0 + 1 / 3) / 2, "3": 0.5})
    assert {s["episode"] for s in seen} == {f"{t}#{a}" for t in "01" for a in range(3)}


def test_a_bad_base_url_is_one_clear_error(wordle_url: str, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", f"http://127.0.0.1:{port}/v1",
                      "--model", "m", "-o", str(tmp_path / "x"))  # fmt: skip
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert f"Error: cannot reach the policy: GET http://127.0.0.1:{port}/v1/models failed: ConnectError" in said
    assert "Check --base-url: the API root that serves /chat/completions" in said
    assert not (tmp_path / "x" / "episodes.jsonl").exists()

    result = run_eval(f"http://127.0.0.1:{port}", "--grader", str(WORDLE_DIR), "--policy",
                      "scripted:tests.evaluation.scripted_policy:act", "-o", str(tmp_path / "y"))  # fmt: skip
    assert result.exit_code == 1
    assert f"Error: the run could not start: GET http://127.0.0.1:{port}/metadata failed: ConnectError" in " ".join(result.output.split())

    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", "localhost:8000/v1", "--model", "m")
    assert result.exit_code == 2 and "--base-url must be an http(s) URL" in result.output
    result = run_eval(wordle_url, "--base-url", "http://localhost:8000/v1", "--model", "m")
    assert result.exit_code == 2 and "name it with --grader" in result.output
    result = run_eval(str(WORDLE_DIR), "--model", "m")
    assert result.exit_code == 2 and "needs --base-url and --model" in result.output


def test_failing_episodes_are_recorded_as_errors_and_the_run_goes_on(
    policy_server: Any, wordle_url: str, tmp_path: Path
) -> None:
    url, _ = policy_server
    out = tmp_path / "refused"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "refuses",
                      "-n", "2", "-o", str(out))  # fmt: skip
    assert result.exit_code == 1, result.output
    records = records_of(out)
    assert len(records) == 2
    for record in records:
        assert record.error is not None and record.error.startswith("[HTTP_400] POST ")
        assert "model not loaded" in record.error
        assert record.reward is None and record.stop_reason == "error"
        assert [m["role"] for m in record.messages] == ["system", "user"]  # the conversation so far
    summary = summary_of(out)
    assert (summary["graded"], summary["errors"], summary["mean_reward"]) == (0, 2, None)
    assert "2 failed episode(s)" in result.output

    out = tmp_path / "slow"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "slow", "-n", "1",
                      "--episode-timeout-s", "0.5", "-o", str(out))  # fmt: skip
    assert result.exit_code == 1
    [record] = records_of(out)
    assert record.error == "the episode did not end within 0.5 s (episode_timeout_s)"


def test_a_policy_mistake_is_a_tool_error_not_an_episode_error(
    policy_server: Any, wordle_url: str, tmp_path: Path
) -> None:
    url, seen = policy_server
    out = tmp_path / "bad-args"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "bad-args",
                      "--task", "3", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    [record] = records_of(out)
    assert (record.error, record.reward, record.tool_calls, record.tool_errors) == (None, 0.0, 1, 1)
    assert record.messages[3]["content"].startswith("error: the arguments of 'guess' are not valid JSON")
    assert seen[-1]["body"]["messages"][3]["role"] == "tool"  # the policy saw the error as the tool's result


def test_a_rerun_resumes_and_replays_only_what_failed(policy_server: Any, wordle_url: str, tmp_path: Path) -> None:
    """A rerun skips the episodes done, replays a failed one and one whose line a crash cut short."""
    url, seen = policy_server
    out = tmp_path / "resume"
    args = [wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "winner", "-o", str(out)]
    assert run_eval(*args, "-n", "2").exit_code == 0
    assert {s["episode"] for s in seen} == {"1000#0", "1001#0"}
    # A crash left an errored record of a third episode and half a line.
    log = EpisodeLog(out / "episodes.jsonl")
    failed = EpisodeRecord(key="1002#0", task_id="1002", split="test", env="wordle", policy="winner", model="winner",
                           error="TransportError: connection lost")  # fmt: skip
    log.append(failed)
    with (out / "episodes.jsonl").open("a") as f:
        f.write('{"key": "1003#0", "task_')
    seen.clear()
    result = run_eval(*args, "-n", "4")
    assert result.exit_code == 0, result.output
    assert {s["episode"] for s in seen} == {"1002#0", "1003#0"}
    summary = summary_of(out)
    assert (summary["episodes"], summary["graded"], summary["resumed"]) == (4, 4, 2)
    assert summary["mean_reward"] == pytest.approx(WIN)
    assert "2 resumed" in result.output
    assert log.load()["1002#0"].error is None and log.unreadable_lines == 1

    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "loser", "-o", str(out))
    assert result.exit_code == 2
    assert "holds episodes of model 'winner' on 'wordle', not 'loser'" in result.output
    seen.clear()
    result = run_eval(*args, "-n", "1", "--overwrite")
    assert result.exit_code == 0 and len(seen) == 2  # played again: two turns
    assert list(log.load()) == ["1000#0"]


def test_an_environment_without_tasks_gets_seeds_and_a_named_grader(echo_server: str, tmp_path: Path) -> None:
    out = tmp_path / "echo"
    result = run_eval(echo_server, "--grader", "tests.evaluation.scripted_policy:echo_grader", "--policy",
                      "scripted:tests.evaluation.scripted_policy:echo_act", "-n", "3", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    records = sorted(records_of(out), key=lambda r: r.key)
    assert [(r.task_id, r.reset_kwargs, r.reward) for r in records] == [
        (f"seed-{i}", {"seed": i}, 1.0) for i in range(3)
    ]
    assert summary_of(out)["split"] is None

    result = run_eval(echo_server, "--policy", "scripted:tests.evaluation.scripted_policy:echo_act", "--split", "train",
                      "--grader", "tests.evaluation.scripted_policy:echo_grader", "-o", str(tmp_path / "x"))  # fmt: skip
    assert result.exit_code == 1
    assert "'train': the environment serves no tasks" in result.output
    result = run_eval(str(WORDLE_DIR.parent / "echo"), "--policy", "scripted:tests.evaluation.scripted_policy:echo_act")
    assert result.exit_code == 2 and "names no `grader:`" in result.output


def test_a_rerun_skips_damaged_or_ill_formed_lines_and_replays_their_episodes(
    policy_server: Any, wordle_url: str, tmp_path: Path
) -> None:
    """Lines cut inside a UTF-8 character, nested past the parser, with a NaN or out-of-range reward or
    ill-formed fields are skipped, counted and their episodes replayed (the run exited 1, or took
    them as done)."""
    url, seen = policy_server
    out = tmp_path / "damaged"
    args = [wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "winner", "-o", str(out)]
    assert run_eval(*args, "-n", "2").exit_code == 0
    path = out / "episodes.jsonl"

    def line(key: str, **fields: Any) -> bytes:
        task_id, attempt = key.split("#")
        record = {"key": key, "task_id": task_id, "attempt": int(attempt), "env": "wordle", "policy": "winner",
                  "model": "winner", "reward": 1.0, **fields}  # fmt: skip
        return json.dumps(record, ensure_ascii=False).encode()

    cut_utf8 = line("1002#0", messages=[{"role": "user", "content": "déjà"}])
    damaged = [
        cut_utf8[: cut_utf8.index("é".encode()) + 1],  # cut inside a UTF-8 character
        b"[" * 100_000 + b"]" * 100_000,  # nested past any parser's depth
        line("1003#0").replace(b'"reward": 1.0', b'"reward": NaN'),
        line("1004#0", reward=1e12),  # out of range
        line("1005#0", attempt=3),  # the key is not task_id#attempt
        line("1006#0", turns=-1),
        line("1007#0", error="boom"),  # a failed episode with a reward
    ]
    with path.open("ab") as f:
        f.write(b"\n".join(damaged) + b"\n")
    seen.clear()
    result = run_eval(*args, "-n", "8")
    assert result.exit_code == 0, result.output
    assert {s["episode"] for s in seen} == {f"100{i}#0" for i in range(2, 8)}  # replayed; 1000, 1001 resumed
    summary = summary_of(out)
    assert (summary["episodes"], summary["graded"], summary["resumed"], summary["skipped_lines"]) == (8, 8, 2, 7)
    assert "7 damaged line(s) of the output skipped" in result.output
    log = EpisodeLog(path)
    records = log.load()
    assert log.unreadable_lines == 7 and len(records) == 8
    assert all(r.reward == pytest.approx(WIN) for r in records.values())
