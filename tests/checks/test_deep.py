"""`openenv validate --deep`: the oracle key, the attack battery's tool classification, and the deep
checks against real servers: each fixture of tests/fixtures/deep is flagged with its fix, and the
shipped environments pass (tests/checks/test_deep_shipped.py plays them all)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_sdk.checks._attacks import ATTACKS, ToolKit, hostile_arguments
from openenv_sdk.checks._deep import DeepOptions, _sample, run_deep_checks
from openenv_sdk.checks._learn import check_learn
from openenv_sdk.checks._oracle import load_oracle, oracle_file
from openenv_sdk.cli.main import app
from openenv_sdk.errors import ManifestError
from openenv_sdk.evaluation import PlannedEpisode, ScriptedPolicy, openai_tools
from openenv_sdk.manifest import Manifest
from openenv_sdk.sandbox._limits import SandboxLimits
from openenv_sdk.sandbox._run import run_process

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "deep"
WORDLE = REPO / "environments" / "wordle"
ECHO = REPO / "environments" / "echo"
runner = CliRunner()


# --- the manifest's oracle --------------------------------------------------------------------


@pytest.mark.parametrize("ref", ["oracle.py:act", "oracle:act", "pkg.oracle:act", "sub/oracle.py:act"])
def test_the_oracle_key_takes_a_file_or_a_module_and_a_function(ref: str) -> None:
    assert Manifest(name="x", oracle=ref).oracle == ref


@pytest.mark.parametrize("ref", ["../oracle.py:act", "/abs/oracle.py:act", "oracle.py", "sub/oracle:act", "oracle.py:a.b"])
def test_a_bad_oracle_reference_is_refused_with_the_form_it_takes(ref: str) -> None:
    with pytest.raises(ValueError, match=r"expected 'FILE_OR_MODULE:FUNCTION' relative to the folder"):
        Manifest(name="x", oracle=ref)


def test_oracle_file_finds_modules_and_refuses_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "oracle.py").write_text("def act(m, t):\n    return 'x'\n")
    assert oracle_file(tmp_path, "pkg.oracle:act") == ((tmp_path / "pkg" / "oracle.py").resolve(), "act")
    assert oracle_file(tmp_path, "pkg/oracle.py:act")[0] == (tmp_path / "pkg" / "oracle.py").resolve()
    with pytest.raises(ManifestError, match=r"oracle 'nope.py:act': no file nope.py in the folder"):
        oracle_file(tmp_path, "nope.py:act")


def test_load_oracle_gives_the_scripted_policy_eval_would_load() -> None:
    policy = load_oracle(WORDLE)
    assert isinstance(policy, ScriptedPolicy) and policy.name == "oracle:oracle.py:act"
    assert load_oracle(FIXTURES / "leaky") is not None


def test_an_oracle_without_its_function_is_a_manifest_error(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("name: x\noracle: oracle.py:play\n")
    (tmp_path / "oracle.py").write_text("def act(messages, tools):\n    return 'done'\n")
    with pytest.raises(ManifestError, match=r"oracle 'oracle.py:play': cannot load the policy .*has no attribute 'play'"):
        load_oracle(tmp_path)


# --- the battery's view of the tools ------------------------------------------------------------


def _tool(name: str, **params: str) -> dict[str, Any]:
    required = [p.rstrip("?") for p in params if not p.endswith("?")]
    properties = {p.rstrip("?"): {"type": kind} for p, kind in params.items()}
    return {"name": name, "description": "", "input_schema": {"type": "object", "properties": properties,
                                                              "required": required}}  # fmt: skip


def test_toolkit_finds_the_shell_files_submit_and_answer_tools() -> None:
    coding = openai_tools([_tool("write_file", path="string", content="string"), _tool("read_file", path="string"),
                           _tool("run_shell", command="string", timeout_s="number"), _tool("submit")])  # fmt: skip
    kit = ToolKit.of(coding)
    assert (kit.shell, kit.write, kit.read, kit.submit) == (("run_shell", "command"), ("write_file", "path", "content"),
                                                            ("read_file", "path"), "submit")  # fmt: skip
    assert kit.can_write and {a.name for a in ATTACKS if a.applies(kit)} == {a.name for a in ATTACKS}
    wordle = ToolKit.of(openai_tools([_tool("guess", word="string")]))
    assert wordle.answer == (("guess", "word"),) and not wordle.can_write
    assert [a.name for a in ATTACKS if a.applies(wordle)] == ["hostile_args"]


def test_hostile_arguments_cover_traversal_size_nul_types_and_unknown_fields() -> None:
    sets = hostile_arguments(openai_tools([_tool("guess", word="string")])[0])
    words = [s.get("word") for s in sets]
    assert {} in sets and any("__proto__" in s for s in sets)
    assert "../../../../../../etc/passwd" in words and "\x00\x00" in words and None in words
    assert any(isinstance(w, str) and len(w) == 100_000 for w in words) and any(isinstance(w, dict) for w in words)


def test_tasks_are_sampled_evenly_across_the_split() -> None:
    planned = [PlannedEpisode(task_id=str(i), attempt=0) for i in range(10)]
    assert [p.task_id for p in _sample(planned, 3)] == ["0", "4", "9"]
    assert [p.task_id for p in _sample(planned, 1)] == ["0"]
    assert len(_sample(planned, None)) == len(_sample(planned, 50)) == 10


def test_a_command_that_fills_its_output_before_reading_its_input_ends() -> None:
    """Found by the battery (coding's write_file with a 100 kB path): the server blocked writing
    stdin while the command blocked writing stderr, past every limit."""
    script = "head -c 300000 /dev/zero | tr '\\0' E >&2; wc -c"
    started = time.monotonic()
    result = run_process(["/bin/sh", "-c", script], limits=SandboxLimits(timeout_s=20), env={"PATH": "/usr/bin:/bin"},
                         preexec=None, stdin="x" * 300_000)  # fmt: skip
    assert time.monotonic() - started < 10
    assert result.exit_code == 0 and result.stdout.strip() == "300000", result


def test_learn_says_when_the_trainers_are_not_installed() -> None:
    pytest.importorskip("openenv_sdk")  # the SDK's own environment: no torch, no TRL
    try:
        import trl  # noqa: F401
    except ImportError:
        result, figures = check_learn(WORDLE, steps=1)
        assert figures is None and result.status == "warn"
        assert result.message.startswith("not run: the trainers extra is not installed here (")
        assert result.fix is not None and "pip install -e trainers" in result.fix
    else:  # the trainers' environment plays it: tests/checks/test_deep_learn.py
        pass


# --- fixtures with one flaw each ------------------------------------------------------------------


def _by_name(checks: list[Any]) -> dict[str, Any]:
    return {check.name: check for check in checks}


@pytest.fixture(scope="module")
def fixture_runs() -> dict[str, Any]:
    options = DeepOptions(tasks=2, sessions=32)
    return {name: run_deep_checks(FIXTURES / name, options=options)
            for name in ("leaky", "always_one", "random_grader", "thread_bound")}  # fmt: skip


def test_a_leaked_answer_is_flagged_by_the_answer_reading_attack(fixture_runs: dict[str, Any]) -> None:
    checks, card = fixture_runs["leaky"]
    by = _by_name(checks)
    assert by["deep.oracle"].passed and by["deep.do_nothing"].passed and by["deep.concurrency"].passed
    leak = by["deep.attack.read_hidden"]
    assert leak.fatal and leak.message.startswith("the agent read hidden data: ")
    assert "hidden/answers.json" in leak.message and "(reward 1)" in leak.message
    assert leak.fix.startswith("Hidden data reached the agent: list it under `hidden:` in openenv.yaml")
    [outcome] = [a for a in card.attacks if a.name == "read_hidden"]
    assert outcome.reward == 1.0 and "hidden/answers.json" in outcome.leaked


def test_an_always_one_grader_is_flagged_by_the_do_nothing_policy(fixture_runs: dict[str, Any]) -> None:
    checks, card = fixture_runs["always_one"]
    by = _by_name(checks)
    assert by["deep.oracle"].passed
    nothing = by["deep.do_nothing"]
    assert nothing.fatal and nothing.message.startswith("doing nothing scored 1 on task 0 (2 of 2 task(s) above 0")
    assert nothing.fix.startswith("The grader rewards an untouched task")
    assert card.do_nothing == {"0": 1.0, "3": 1.0}
    assert by["deep.attack.hostile_args"].fatal  # it scores 1 too


def test_a_nondeterministic_grader_is_flagged(fixture_runs: dict[str, Any]) -> None:
    checks, card = fixture_runs["random_grader"]
    check = _by_name(checks)["deep.determinism"]
    assert check.fatal and check.message.startswith("the same task (0) and actions gave different rewards: ")
    assert check.fix.startswith("Make grading a function of the episode alone: seed every random choice")
    assert len(card.repeats["oracle"]) == 3 and len(set(card.repeats["oracle"])) == 3


def test_a_thread_bound_resource_in_a_free_threaded_class_is_flagged(fixture_runs: dict[str, Any]) -> None:
    checks, card = fixture_runs["thread_bound"]
    check = _by_name(checks)["deep.concurrency"]
    assert check.fatal and "SQLite objects created in a thread can only be used in that same thread" in check.message
    assert check.fix.startswith("Something the environment holds is bound to the thread that made it")
    assert "remove `THREAD_AFFINITY = False`" in check.fix
    assert card.load is not None and card.load.sessions == 32 and card.load.tool_errors > 0


def _quiz_copy(tmp_path: Path, oracle_line: str | None) -> Path:
    """The leaky quiz copied beside its base module, with another `oracle:` line (or none)."""
    shutil.copy(FIXTURES / "deep_fixture_quiz.py", tmp_path / "deep_fixture_quiz.py")
    folder = tmp_path / "quiz"
    shutil.copytree(FIXTURES / "leaky", folder, ignore=shutil.ignore_patterns("__pycache__"))
    lines = [line for line in (folder / "openenv.yaml").read_text().splitlines() if not line.startswith("oracle:")]
    (folder / "openenv.yaml").write_text("\n".join([*lines, *([oracle_line] if oracle_line else [])]) + "\n")
    return folder


def test_a_graded_environment_without_an_oracle_is_told_how_to_write_one(tmp_path: Path) -> None:
    checks, card = run_deep_checks(_quiz_copy(tmp_path, None), options=DeepOptions(tasks=1, sessions=4))
    by = _by_name(checks)
    assert by["deep.oracle"].fatal and by["deep.oracle"].message == "the manifest names no oracle (a reference solution to play)"
    assert "`oracle: oracle.py:act`" in by["deep.oracle"].fix
    assert by["deep.do_nothing"].passed and card.oracle == {}
    assert "sampled-tool-calls" in by["deep.concurrency"].message  # without an oracle, each tool once


def test_an_oracle_that_does_not_load_is_one_failure_naming_why(tmp_path: Path) -> None:
    checks, _ = run_deep_checks(_quiz_copy(tmp_path, "oracle: oracle.py:nope"), options=DeepOptions(tasks=1, sessions=4))
    [oracle] = [c for c in checks if c.name == "deep.oracle"]
    assert oracle.fatal and oracle.message.startswith("the oracle does not load: ")
    assert "has no attribute 'nope'" in oracle.message


# --- shipped environments, through the CLI ----------------------------------------------------------


def test_wordle_passes_deep_validation_with_a_json_scorecard() -> None:
    result = runner.invoke(app, ["validate", str(WORDLE), "--deep", "--tasks", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    deep = {c["name"]: c["status"] for c in report["checks"] if c["name"].startswith("deep.")}
    assert deep == {"deep.oracle": "pass", "deep.do_nothing": "pass", "deep.determinism": "pass",
                    "deep.attack.hostile_args": "pass", "deep.attack.others": "skip", "deep.concurrency": "pass",
                    "deep.latency": "pass", "deep.memory": "pass"}  # fmt: skip
    card = report["scorecard"]
    assert card["env"] == "wordle" and len(card["tasks"]) == 2
    assert set(card["oracle"].values()) == {1.7} and set(card["do_nothing"].values()) == {0.0}
    load = card["load"]
    assert load["sessions"] == 32 and load["tool_errors"] == 0 and load["failed_episodes"] == 0
    assert set(load["latency_ms"]) == {"reset", "step", "tool"} and load["latency_ms"]["tool"]["count"] == 32
    assert load["memory_per_session_mib"] is not None


def test_echo_without_a_grader_skips_the_graded_checks_and_plays_its_oracle_under_load() -> None:
    result = runner.invoke(app, ["validate", str(ECHO), "--deep", "--sessions", "8"])
    assert result.exit_code == 0, result.output
    assert "deep.oracle" in result.output and "the manifest names no grader" in result.output
    assert "8 episodes, 8 tool calls, no failure" in result.output and "scorecard" in result.output


def test_deep_options_are_refused_without_deep_and_against_a_url() -> None:
    result = runner.invoke(app, ["validate", str(WORDLE), "--tasks", "5"])
    assert result.exit_code == 2 and "apply to --deep only" in result.output
    result = runner.invoke(app, ["validate", "--url", "http://127.0.0.1:9", "--deep"])
    assert result.exit_code == 2 and "--deep plays a folder or an image, not a URL" in result.output


# --- an image ---------------------------------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
                    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1")  # fmt: skip
@pytest.mark.timeout(1200)
def test_wordle_image_passes_with_the_folders_grader_and_oracle() -> None:
    from openenv_sdk.build import build_image

    tag = build_image(WORDLE, output="quiet", timeout_s=900)
    result = runner.invoke(app, ["validate", str(WORDLE), "--image", tag, "--deep", "--tasks", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kind"] == "image" and report["target"] == tag
    deep = {c["name"]: c["status"] for c in report["checks"] if c["name"].startswith("deep.")}
    assert deep["deep.oracle"] == deep["deep.do_nothing"] == deep["deep.concurrency"] == "pass", deep
    card = report["scorecard"]
    assert set(card["oracle"].values()) == {1.7} and card["load"]["failed_episodes"] == 0
    assert card["load"]["memory_per_session_mib"] is not None  # the container's own figure
    # without the folder there is no grader to run: the graded checks say so
    result = runner.invoke(app, ["validate", "--image", tag, "--deep", "--sessions", "4", "--json"])
    skipped = {c["name"]: c for c in json.loads(result.output)["checks"] if c["name"].startswith("deep.")}
    assert skipped["deep.oracle"]["status"] == "skip" and "pass PATH with --image" in skipped["deep.oracle"]["message"]
    assert skipped["deep.concurrency"]["status"] == "pass"
