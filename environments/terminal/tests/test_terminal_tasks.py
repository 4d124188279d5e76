"""The task set: its shape, its public/hidden split, and that no check passes on a starting workspace."""

from __future__ import annotations

import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from terminal_testkit import ENV_DIR, HIDDEN_DIR, script_blocks, terminal_env, terminal_grader

from openenv_sdk.grading.shell_lint import runs_agent_code
from openenv_sdk.manifest import load_manifest

TASKS = terminal_env.load_tasks()


def test_there_are_at_least_30_tasks_across_every_category_and_difficulty() -> None:
    assert len(TASKS) >= 30
    assert set(Counter(t.category for t in TASKS.values())) == {
        "files", "text", "config", "git", "scripting", "permissions", "archives"
    }
    assert set(Counter(t.difficulty for t in TASKS.values())) == {"easy", "medium", "hard"}
    assert terminal_env.task_ids() == sorted(TASKS)


def test_every_task_has_a_check_a_reference_solution_and_a_null_attempt() -> None:
    for task_id in TASKS:
        folder = HIDDEN_DIR / task_id
        assert (folder / "check.sh").is_file(), task_id
        assert script_blocks(task_id, "solution"), task_id
        assert (folder / "null.sh").is_file(), task_id
        assert "finish" in (folder / "check.sh").read_text(), f"{task_id}: a check must end with finish"
    assert sorted(p.name for p in HIDDEN_DIR.iterdir() if p.is_dir()) == sorted(TASKS)


def test_the_grader_sends_the_check_but_never_the_solutions() -> None:
    files = terminal_grader.check_files("git_merge_conflict")
    assert sorted(files) == ["check.sh", "lib.sh"]
    assert files["lib.sh"] == (HIDDEN_DIR / "lib.sh").read_text()


def test_public_task_data_holds_nothing_of_the_checks() -> None:
    """No check's expectations leak into what the image carries (tasks/ and the code)."""
    hidden_texts = {p.read_text() for p in HIDDEN_DIR.rglob("*.sh")}
    public = [p for p in (ENV_DIR / "tasks").rglob("*") if p.is_file()]
    public += [ENV_DIR / "terminal_env.py", ENV_DIR / "openenv.yaml", ENV_DIR / "README.md", ENV_DIR / "grader.py"]
    for path in public:
        text = path.read_text(errors="replace")
        assert "__failed=$((__failed + 1))" not in text, path
        assert not any(h.strip() and h.strip() in text for h in hidden_texts), path


def test_the_manifest_keeps_hidden_out_of_the_image_and_sandboxes_commands() -> None:
    manifest = load_manifest(ENV_DIR)
    assert manifest.hidden == ["hidden", "tests"]
    assert manifest.network.policy == "none"
    assert manifest.sandbox is not None and manifest.sandbox.system_packages == ["git"]
    assert manifest.environment == "terminal_env:TerminalEnvironment"
    assert manifest.grader == "grader:TerminalGrader"
    assert manifest.server.tool_timeout_s > manifest.sandbox.command_timeout_s


def _untouched_result(task_id: str) -> tuple[str, dict]:
    env = terminal_env.TerminalEnvironment()
    try:
        env.reset(task_id=task_id)
        files = terminal_grader.check_files(task_id)
        return task_id, env.run_checks(files, terminal_grader.CHECK_COMMAND, 60.0)
    finally:
        env.close()


def test_no_check_passes_on_the_starting_workspace() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(pool.map(_untouched_result, TASKS))
    passing = [task_id for task_id, result in results.items() if result["exit_code"] == 0]
    assert passing == []
    assert all(result["failed"] and not result["timed_out"] for result in results.values())


CHECK_RUNNER = r"\bcheck\s+(?:\"[^\"]*\"|'[^']*'|\S+)"
"""lib.sh's `check WHAT COMMAND...` runs COMMAND."""


def test_no_check_runs_the_agents_code_but_through_run_agent() -> None:
    """Every program of the agent a check runs goes through run_agent/run_program (a fresh
    sandbox); a lint over every check.sh and test.sh, as far as a lint can tell."""
    scripts = {p.relative_to(HIDDEN_DIR).as_posix(): p.read_text() for p in HIDDEN_DIR.rglob("*.sh")}
    checks = {name: text for name, text in scripts.items() if name.endswith(("/check.sh", "/tests/test.sh"))}
    assert len(checks) == len(TASKS) + 3
    offending = {
        name: runs_agent_code(text, ["$WORKSPACE", "/app"], runners=[CHECK_RUNNER]) for name, text in checks.items()
    }
    assert {name: lines for name, lines in offending.items() if lines} == {}


def test_the_lint_finds_direct_runs_of_the_agents_code() -> None:
    """The lint's control: the forms the checks used before run_agent went through a sandbox."""
    direct = [
        "py() { printf '%b' \"$1\" | timeout -k 1 10 python3 stats.py 2>/dev/null; }",
        'out=$(timeout -k 1 10 python3 "$WORKSPACE/csv2json.py" tricky.csv </dev/null 2>/dev/null)',
        'timeout 10 ./deploy.sh </dev/null >"$TMPDIR/usage.out"',
        'check "a second run succeeds" ./deploy.sh "my app"',
        'expect_eq "x" "Hello" "$("$WORKSPACE/bin/greet" Bob)"',
        "bash fix.sh",
        "cd repo && make",
        "python3 -m pytest tests/ && . ./env.sh",
    ]
    for line in direct:
        assert runs_agent_code(line, ["$WORKSPACE"], runners=[CHECK_RUNNER]) == [line], line
    through = [
        'expect_eq "x" "Hello" "$(run_agent ./bin/greet Alice)"',
        "py() { printf '%b' \"$1\" | run_program 10 python3 stats.py 2>/dev/null; }",
        'check "a second run succeeds" run_agent ./deploy.sh "my app"',
        'check "parses" python3 -c \'import json; json.load(open("config.json"))\'',
        "timeout -k 5 55 bash /tests/test.sh",
    ]
    for line in through:
        assert runs_agent_code(line, ["$WORKSPACE"], runners=[CHECK_RUNNER]) == [], line
