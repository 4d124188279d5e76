"""The coding environment in-process: the task set, task choice, workspaces, tools, run_checks,
and the grader's scoring."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from coding_support import AS_ROOT, CODING_DIR, coding_env, coding_grader, reference

from openenv_sdk import ToolFailure
from openenv_sdk.manifest import load_manifest

CodingEnvironment = coding_env.CodingEnvironment
TASKS = coding_env.load_tasks()


@pytest.fixture
def env() -> Iterator[Any]:
    environment = CodingEnvironment()
    yield environment
    environment.close()


# --- the task set ---------------------------------------------------------------------------


def test_task_set_has_graded_difficulty() -> None:
    counts = Counter(task.difficulty for task in TASKS.values())
    assert len(TASKS) >= 50
    assert counts["easy"] >= 15 and counts["medium"] >= 20 and counts["hard"] >= 15
    assert list(TASKS) == sorted(TASKS, key=lambda t: (("easy", "medium", "hard").index(TASKS[t].difficulty), t))


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_task_is_complete(task_id: str) -> None:
    task = TASKS[task_id]
    hidden = CODING_DIR / "hidden" / task_id
    tests = sorted(hidden.glob("test_*.py"))
    assert tests, f"{task_id} has no hidden tests"
    assert (hidden / "reference.py").is_file()
    assert f"`{task.solution_file}`" in task.prompt
    ast.parse(task.files[task.solution_file])  # the stub is valid Python
    module = task.solution_file.removesuffix(".py")
    assert all(f"from {module} import" in test.read_text() for test in tests)
    expected = json.loads((CODING_DIR / "hidden" / "expected_tests.json").read_text())
    assert len(expected[task_id]) >= 3, "each task needs several test cases"


def test_task_files_hold_no_hidden_material() -> None:
    for file in (CODING_DIR / "tasks").glob("*.yaml"):
        data = yaml.safe_load(file.read_text())
        assert set(data) == {"id", "title", "difficulty", "category", "solution_file", "prompt", "files"}
        hidden_tests = (CODING_DIR / "hidden" / data["id"]).glob("test_*.py")
        names = [n for t in hidden_tests for n in ast.walk(ast.parse(t.read_text())) if isinstance(n, ast.FunctionDef)]
        assert not any(n.name in file.read_text() for n in names if n.name.startswith("test_"))



@pytest.mark.parametrize(
    ("solution_file", "message"),
    [("json.py", "would shadow"), ("openenv_sdk.py", "would shadow"), ("pkg/solution.py", "must be a module file")],
)
def test_a_task_whose_solution_file_cannot_be_graded_is_refused(solution_file: str, message: str) -> None:
    """A task's solution file is checked at load by run_checks' own rule (pytest_run.check_solution_file)."""
    task = {"id": "x", "title": "X", "difficulty": "easy", "category": "c", "prompt": "p", "files": {"a.py": ""}}
    with pytest.raises(ValueError, match=message):
        coding_env.Task.model_validate({**task, "solution_file": solution_file})
    assert coding_env.Task.model_validate({**task, "solution_file": "a.py"}).solution_file == "a.py"

def test_manifest_keeps_hidden_out_of_the_image() -> None:
    manifest = load_manifest(CODING_DIR)
    assert manifest.hidden == ["hidden", "tests"]
    assert manifest.network.policy == "none"
    assert manifest.sandbox is not None and manifest.sandbox.user == "agent"
    assert "pytest>=8" in manifest.dependencies


# --- choosing the task ------------------------------------------------------------------------


def test_task_id_wins_over_seed(env: Any) -> None:
    obs = env.reset(seed=3, task_id="lru_cache")
    assert obs.task_id == "lru_cache" and env.state.task_id == "lru_cache"


def test_seed_picks_deterministically() -> None:
    picks = []
    for _ in range(2):
        environment = CodingEnvironment()
        picks.append([environment.reset(seed=s).task_id for s in range(8)])
        environment.close()
    assert picks[0] == picks[1] and len(set(picks[0])) > 1


def test_difficulty_narrows_the_seeded_choice(env: Any) -> None:
    for seed in range(10):
        assert env.reset(seed=seed, difficulty="hard").difficulty == "hard"


def test_unknown_task_id_says_did_you_mean(env: Any) -> None:
    with pytest.raises(ValueError, match="Did you mean 'lru_cache'"):
        env.reset(task_id="lru_cach")


def test_unknown_reset_argument_is_refused(env: Any) -> None:
    with pytest.raises(ValueError, match=r"unknown reset argument\(s\) \['taskid'\]"):
        env.reset(taskid="fizzbuzz")


def test_a_bad_reset_keeps_the_current_episode(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    with pytest.raises(ValueError):
        env.reset(task_id="nope")
    assert env.state.task_id == "fizzbuzz" and "Wrote" in env.write_file("x.txt", "still here")


# --- the first observation and the state --------------------------------------------------------


def test_first_observation_tells_the_agent_what_it_needs(env: Any) -> None:
    obs = env.reset(task_id="expression_evaluator")
    assert obs.solution_file == "calc.py" and obs.files == ["calc.py"]
    assert Path(obs.working_directory).is_dir()
    assert obs.tools == ["write_file", "read_file", "list_files", "run_python", "run_file", "run_shell", "submit"]
    assert obs.prompt in obs.message and obs.working_directory in obs.message
    assert "Only calc.py is graded" in obs.message and "submit" in obs.message
    assert obs.reward is None and not obs.done


def test_state_has_no_tests_and_no_reward(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("solution.py", reference("fizzbuzz"))
    state = env.state.model_dump()
    assert set(state) == {
        "episode_id", "step_count", "task_id", "title", "difficulty", "category", "solution_file",
        "working_directory", "tool_calls", "submitted",
    }  # fmt: skip
    assert "test_" not in json.dumps(state) and "reward" not in json.dumps(state)


# --- workspaces ---------------------------------------------------------------------------------------


def test_each_session_gets_its_own_fresh_workspace() -> None:
    a, b = CodingEnvironment(), CodingEnvironment()
    try:
        a.reset(task_id="fizzbuzz")
        b.reset(task_id="fizzbuzz")
        assert a.state.working_directory != b.state.working_directory
        a.write_file("solution.py", "changed")
        assert "raise NotImplementedError" in b.read_file("solution.py")
    finally:
        a.close()
        b.close()


def test_workspace_is_removed_on_close_and_on_the_next_reset(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    first = Path(env.state.working_directory)
    env.reset(task_id="chunk")
    second = Path(env.state.working_directory)
    assert not first.exists() and not first.parent.exists()
    assert (second / "solution.py").read_text().startswith("def chunk(")
    env.close()
    assert not second.parent.exists()


@pytest.mark.skipif(not AS_ROOT, reason="ownership is only changed when the server runs as root")
def test_workspace_belongs_to_the_sandbox_user_inside_a_closed_root(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    workspace = Path(env.state.working_directory)
    agent_uid = int(env.run_shell("id -u").split()[0])
    info, root_info = workspace.stat(), workspace.parent.stat()
    assert agent_uid != 0 and (workspace / "solution.py").stat().st_uid == agent_uid
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o770) and info.st_gid == env._sandbox.gid
    assert root_info.st_uid == 0 and stat.S_IMODE(root_info.st_mode) == 0o711
    assert "Operation not permitted" in env.run_shell("chmod 000 .")
    assert env.run_shell("touch new && ls -n new").split()[2] == str(agent_uid)


def test_workdir_is_configurable(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="coding-workdir-"))
    try:
        base.chmod(0o711)
        monkeypatch.setenv(coding_env.WORKDIR_ENV, str(base / "work"))
        env.reset(task_id="fizzbuzz")
        assert Path(env.state.working_directory).parent.parent == base / "work"
        assert env.run_shell("ls") == "solution.py\n[exit code 0]"
    finally:
        env.close()
        shutil.rmtree(base)


def test_a_workdir_closed_to_others_still_works(env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path.chmod(0o700)  # the sandbox mounts the session folder itself: the folders above need not be open
    monkeypatch.setenv(coding_env.WORKDIR_ENV, str(tmp_path / "work"))
    env.reset(task_id="fizzbuzz")
    assert env.run_shell("ls") == "solution.py\n[exit code 0]"


# --- tools ------------------------------------------------------------------------------------------


def test_tools_need_an_episode(env: Any) -> None:
    with pytest.raises(ToolFailure, match="has not called reset"):
        env.run_shell("true")


def test_write_read_and_list(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    assert env.write_file("pkg/notes.txt", "héllo\n") == "Wrote 7 bytes to pkg/notes.txt."
    assert env.read_file("pkg/notes.txt") == "héllo\n"
    assert env.list_files() == "pkg/\npkg/notes.txt  7 bytes\nsolution.py  {} bytes".format(
        len(coding_env.load_tasks()["fizzbuzz"].files["solution.py"].encode())
    )
    assert env.read_file("empty.txt").endswith("[exit code 1]")
    env.write_file("empty.txt", "")
    assert env.read_file("empty.txt") == "(the file is empty)"


def test_read_file_cuts_long_files(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("big.txt", "y" * 100_000)
    text = env.read_file("big.txt")
    assert text.startswith("y" * 1000) and "[... 34464 bytes truncated ...]" in text


def test_write_file_refuses_huge_content(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    with pytest.raises(ToolFailure, match="limited to 1048576 bytes"):
        env.write_file("x", "z" * (coding_env.MAX_FILE_BYTES + 1))


def test_run_python_file_and_shell_report_output_and_status(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    assert env.run_python("print(6 * 7)") == "42\n[exit code 0]"
    failed = env.run_python("import sys\nprint('out')\nsys.exit('bad input')")
    assert failed == "out\n[stderr]\nbad input\n[exit code 1]"
    env.write_file("echo.py", "import sys\nprint(sys.argv[1:])")
    assert env.run_file("echo.py", ["a", "b c"]) == "['a', 'b c']\n[exit code 0]"
    assert env.run_shell("echo hi; echo oops >&2; exit 3") == "hi\n[stderr]\noops\n[exit code 3]"


def test_pytest_and_the_solution_are_usable_from_the_shell(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("solution.py", reference("fizzbuzz"))
    env.write_file(
        "test_mine.py", "from solution import fizzbuzz\n\ndef test_it():\n    assert fizzbuzz(3)[-1] == 'Fizz'\n"
    )
    assert "1 passed" in env.run_shell("pytest -q -p no:cacheprovider test_mine.py")


def test_timeout_is_capped_by_the_sandbox_limit(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    assert env._limits(1000).timeout_s == 30 and env._limits(2).timeout_s == 2
    with pytest.raises(ToolFailure, match="positive"):
        env.run_shell("true", timeout_s=0)


def test_submit_ends_the_episode(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    assert env.submit().startswith("Submitted.")
    assert env.episode_done and env.state.submitted
    with pytest.raises(ToolFailure, match="the episode is over"):
        env.run_shell("true")
    env.reset(task_id="fizzbuzz")
    assert not env.episode_done and env.run_shell("true") == "[exit code 0]"


# --- run_checks (the grader's call) ------------------------------------------------------------------


def _checks(env: Any, task_id: str, grader: Any = None, **overrides: Any) -> tuple[Any, dict[str, Any]]:
    grader = grader or coding_grader.CodingGrader()
    return grader, env.run_checks(**{**grader.check_request(task_id), **overrides})


_PROBE_TEST = """
import json, os
from solution import seen

def test_probe():
    worker_cwd, worker_sees_workspace, worker_dir = seen()
    trusted = sorted(n for n in os.listdir(".") if n not in ("__pycache__", "pytest.ini"))
    json.dump({{"trusted": trusted, "trusted_dir": os.getcwd(), "worker_cwd": worker_cwd,
               "workspace": worker_sees_workspace, "worker_dir": worker_dir}}, open({out!r}, "w"))
"""
_PROBE_SOLUTION = """
import os
_cwd, _workspace, _dir = sorted(os.listdir(".")), os.path.exists({workspace!r}), os.getcwd()

def seen():
    return _cwd, _workspace, _dir
"""


def test_run_checks_keeps_the_trusted_run_and_the_worker_apart(env: Any, tmp_path: Path) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("solution.py", _PROBE_SOLUTION.format(workspace=env.state.working_directory))
    env.write_file("conftest.py", "raise SystemExit('the agent conftest must not load')")
    env.write_file("helper.py", "x = 1")
    out = tmp_path / "probe.json"  # the trusted run is the server's: it writes where the host test reads
    run = env.run_checks(files={"test_probe.py": _PROBE_TEST.format(out=str(out))})
    assert run["outcomes"] == {"test_probe.py::test_probe": "passed"}, run
    assert run["exit_code"] == 0 and run["solution_files"] == {"solution.py": "copied"}, run
    probe = json.loads(out.read_text())
    assert probe["trusted"] == ["test_probe.py"]  # the trusted run holds no file of the agent's
    assert probe["worker_cwd"] == ["solution.py"]  # the worker, only the solution's copy
    assert probe["workspace"] is False  # nor the agent's workspace
    assert not Path(probe["trusted_dir"]).exists() and not Path(probe["worker_dir"]).parent.exists()  # both removed


def test_run_checks_validates_its_arguments(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    for files in ({"../escape.py": ""}, {"/abs.py": ""}, {"solution.py": ""}, {}):
        with pytest.raises(ValueError):
            env.run_checks(files=files)
    with pytest.raises(ValueError, match="list of strings"):
        env.run_checks(files={"test_a.py": ""}, pytest_args=[1])
    with pytest.raises(ValueError, match="timeout_s"):
        env.run_checks(files={"test_a.py": ""}, timeout_s=10_000)
    with pytest.raises(ValueError, match="call_timeout_s"):
        env.run_checks(files={"test_a.py": ""}, timeout_s=5, call_timeout_s=10)
    with pytest.raises(ValueError, match="test_timeout_s"):
        env.run_checks(files={"test_a.py": ""}, timeout_s=5, call_timeout_s=1, test_timeout_s=10)


def test_run_checks_reports_a_missing_solution(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.run_shell("rm solution.py")
    grader, run = _checks(env, "fizzbuzz")
    assert run["solution_files"] == {"solution.py": "missing"}
    score = grader.score("fizzbuzz", run)
    assert score.value == 0.0 and score.evidence["passed"] == 0
    assert score.evidence["solution_file"] == {"solution.py": "missing"}


def test_run_checks_does_not_follow_a_symlinked_solution(env: Any, tmp_path: Path) -> None:
    env.reset(task_id="fizzbuzz")
    secret = tmp_path / "secret.py"
    secret.write_text(reference("fizzbuzz"))
    env.run_shell(f"rm solution.py && ln -s {secret} solution.py")
    grader, run = _checks(env, "fizzbuzz")
    assert run["solution_files"] == {"solution.py": "a symbolic link (not followed)"}
    assert grader.score("fizzbuzz", run).value == 0.0


# --- scoring -------------------------------------------------------------------------------------


def test_reference_scores_one_with_evidence_per_test(env: Any) -> None:
    env.reset(task_id="roman_numerals")
    env.write_file("solution.py", reference("roman_numerals"))
    grader, run = _checks(env, "roman_numerals")
    score = grader.score("roman_numerals", run)
    assert score.value == 1.0 and score.components == {"all_passed": 1.0, "partial": 1.0}, score.evidence
    assert score.evidence["passed"] == score.evidence["total"] == len(score.evidence["tests"]) > 10
    assert set(score.evidence["tests"].values()) == {"passed"}


def test_partially_right_solution_scores_zero_with_partial_component(env: Any) -> None:
    env.reset(task_id="roman_numerals")
    # to_roman right, from_roman accepts non-canonical numerals
    lenient = reference("roman_numerals").replace("or to_roman(total) != s", "")
    env.write_file("solution.py", lenient)
    grader, run = _checks(env, "roman_numerals")
    score = grader.score("roman_numerals", run)
    assert score.value == 0.0 and 0.5 < score.components["partial"] < 1.0
    failed = [t for t, outcome in score.evidence["tests"].items() if outcome != "passed"]
    assert failed and all("from_roman_rejects" in t for t in failed)
    assert set(score.evidence["failures"]) == set(failed)
    partial = coding_grader.CodingGrader(partial_credit=1.0).score("roman_numerals", run)
    assert partial.value == score.components["partial"]


def test_a_missing_report_scores_zero(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("solution.py", reference("fizzbuzz"))
    grader, run = _checks(env, "fizzbuzz")
    assert grader.score("fizzbuzz", run).value == 1.0
    lost = grader.score("fizzbuzz", {**run, "report_read": False})
    assert lost.value == 0.0 and lost.evidence["report"] == "missing or unreadable"
    wrong = grader.score("fizzbuzz", {**run, "exit_code": 1})  # pytest's exit status counts too
    assert wrong.value == 0.0 and wrong.components["partial"] == 1.0


def test_a_timed_out_run_scores_zero(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    env.write_file("solution.py", "import time\ntime.sleep(60)\n" + reference("fizzbuzz"))
    grader, run = _checks(env, "fizzbuzz", timeout_s=3, call_timeout_s=2, test_timeout_s=2)
    score = grader.score("fizzbuzz", run)
    assert score.value == 0.0 and score.evidence["passed"] == 0, score.evidence


def test_a_slow_call_fails_its_test_alone(env: Any) -> None:
    env.reset(task_id="fizzbuzz")
    slow = reference("fizzbuzz").replace(
        "    out = []", "    if n == 100:\n        while True:\n            pass\n    out = []"
    )
    env.write_file("solution.py", slow)
    grader = coding_grader.CodingGrader(test_timeout_s=1)
    score = grader.score("fizzbuzz", env.run_checks(**grader.check_request("fizzbuzz")))
    assert score.value == 0.0 and score.evidence["passed"] == 3, score.evidence
    assert score.evidence["tests"]["test_fizzbuzz.py::test_long_run"] == "failed"
    assert "did not answer within 1 s" in score.evidence["failures"]["test_fizzbuzz.py::test_long_run"]


def test_grader_refuses_a_bad_partial_credit() -> None:
    with pytest.raises(ValueError, match="partial_credit"):
        coding_grader.CodingGrader(partial_credit=1.5)


def test_grader_knows_every_tasks_expected_tests() -> None:
    grader = coding_grader.CodingGrader()
    for task_id in TASKS:
        assert grader.expected_tests(task_id)
        assert grader.test_files(task_id)
    with pytest.raises(KeyError, match="--update-expected"):
        grader.expected_tests("nope")


def test_grader_module_needs_no_environment_code() -> None:
    source = (CODING_DIR / "grader.py").read_text()
    assert "coding_env" not in source and os.path.basename(coding_grader.__file__) == "grader.py"
