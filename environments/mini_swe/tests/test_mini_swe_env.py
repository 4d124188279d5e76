"""mini_swe in-process: task selection, the workspace, each tool, submit, and run_tests."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import mini_swe_fsops as fsops
import pytest
from mini_swe_env import MiniSweEnvironment, pick_task, task_ids, tasks
from mini_swe_sandbox import (
    SandboxHost,
    _process_identity,
    check_relative_path,
    diff_trees,
    host,
    read_tree,
    workspace_tampering,
)
from mini_swe_testkit import ENV_DIR, IS_ROOT, load_grader_module

from openenv_sdk import ToolFailure
from openenv_sdk.manifest import Sandbox

# --- tasks ----------------------------------------------------------------------------------


def test_seed_picks_the_same_task_and_task_id_wins(env: MiniSweEnvironment) -> None:
    assert pick_task(None, 11) == pick_task(None, 11)
    assert pick_task("pagekit-1", 11).task_id == "pagekit-1"
    assert len({pick_task(None, seed).task_id for seed in range(60)}) > 5
    other = MiniSweEnvironment()
    try:
        assert env.reset(seed=11).task_id == other.reset(seed=11).task_id == pick_task(None, 11).task_id
    finally:
        other.close()


def test_task_set() -> None:
    assert len(task_ids("train")) == 13 and task_ids("demo") == ["demo-1"]
    assert all((tasks()[t].repo_path / "tests").is_dir() for t in task_ids())
    assert "demo-1" not in {pick_task(None, seed).task_id for seed in range(200)}


def test_unknown_task_id_suggests_the_closest(env: MiniSweEnvironment) -> None:
    with pytest.raises(ValueError, match=r"unknown task_id 'datekit-2'\. Did you mean 'datekit-1'\?"):
        env.reset(task_id="datekit-2")


def test_first_observation_tells_the_agent_what_it_needs(env: MiniSweEnvironment) -> None:
    obs = env.reset(task_id="lrukit-1")
    assert obs.task_id == "lrukit-1" and obs.title == tasks()["lrukit-1"].title
    assert obs.workdir and Path(obs.workdir).is_dir()
    assert obs.tools == ["read_file", "list_files", "search", "edit_file", "write_file", "run", "submit"]
    for needed in (obs.issue, obs.workdir, "python -m pytest", "submit()", *(f"- {name}(" for name in obs.tools)):
        assert needed in obs.prompt
    assert obs.reward is None and not obs.done


def test_state_holds_no_answer(env: MiniSweEnvironment) -> None:
    env.reset(task_id="semverlite-1")
    dumped = json.dumps(env.state.model_dump())
    assert env.state.task_id == "semverlite-1" and env.state.submitted is False
    hidden = json.loads((ENV_DIR / "hidden" / "semverlite-1" / "task.json").read_text())
    for secret in (*hidden["FAIL_TO_PASS"], "gold", "hidden", "reward"):
        assert secret not in dumped


# --- the workspace --------------------------------------------------------------------------


def test_workspace_is_a_fresh_copy_owned_by_the_sandbox_user(env: MiniSweEnvironment) -> None:
    repo = Path(env.reset(task_id="datekit-1").workdir)
    original, _ = read_tree(ENV_DIR / "tasks" / "datekit-1" / "repo")
    copied, _ = read_tree(repo)
    assert copied == original
    assert (repo / ".git").is_dir()
    uid = env._dirs.uid
    assert repo.stat().st_uid == uid and (repo / "datekit" / "calendar.py").stat().st_uid == uid
    if IS_ROOT:  # a uid of its own, leased for the session
        assert uid not in (0, os.getuid())
    base_mode = stat.S_IMODE(host().base.stat().st_mode)
    assert base_mode == 0o711  # others may pass through, never list


def test_a_later_session_of_a_task_gets_the_first_ones_fresh_repository_not_its_changes(env: MiniSweEnvironment) -> None:
    """Later resets copy the repository (and `.git`) the first session's git made before any
    command of its agent ran: the first agent's edits, files and git changes never carry over."""
    env.reset(task_id="pagekit-1")
    env.write_file("pagekit/planted.py", "x = 1\n")
    env.run("git config user.name agent && git commit -qam edited --allow-empty && echo trap > .git/hooks/pre-commit")
    other = MiniSweEnvironment()
    try:
        repo = Path(other.reset(task_id="pagekit-1").workdir)
        original, _ = read_tree(ENV_DIR / "tasks" / "pagekit-1" / "repo")
        assert read_tree(repo)[0] == original
        assert other.run("git status --porcelain; git log --oneline | wc -l").startswith("1\n")  # clean, one commit
        assert not (repo / ".git" / "hooks" / "pre-commit").exists()
        uid = other._dirs.uid
        assert all(p.stat().st_uid == uid for p in [repo, *repo.rglob("*")])
        other.edit_file("pagekit/__init__.py", "pagination arithmetic.", "pagination arithmetic, edited.")
        assert "pagekit/__init__.py | 2 +-" in other.run("git diff --stat")
    finally:
        other.close()


def test_reset_and_close_remove_the_workspace(env: MiniSweEnvironment) -> None:
    first = Path(env.reset(task_id="datekit-1").workdir)
    second = Path(env.reset(task_id="datekit-1").workdir)
    assert not first.exists() and second.is_dir() and first != second
    env.close()
    assert not second.exists()


def test_sessions_do_not_share_a_workspace() -> None:
    a, b = MiniSweEnvironment(), MiniSweEnvironment()
    try:
        a.reset(task_id="toktext-1")
        b.reset(task_id="toktext-1")
        a.write_file("NOTE.txt", "from a")
        assert "does not exist" in _error(b.read_file, "NOTE.txt")
    finally:
        a.close()
        b.close()


@pytest.mark.skipif(not IS_ROOT, reason="the hidden/ directory is only closed when the server is root")
def test_hidden_directory_is_closed_to_the_sandbox_user(env: MiniSweEnvironment) -> None:
    env.reset(task_id="datekit-1")
    assert stat.S_IMODE((ENV_DIR / "hidden").stat().st_mode) == 0o700


# --- tools ----------------------------------------------------------------------------------


def _error(fn, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolFailure) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_read_file_numbers_lines_and_reads_ranges(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    whole = env.read_file("intervals/ops.py")
    assert whole.startswith("intervals/ops.py (lines 1-")
    assert '     1\t"""Operations on lists of closed intervals."""' in whole
    part = env.read_file("intervals/ops.py", start_line=3, end_line=4)
    assert part.splitlines() == [
        "intervals/ops.py (lines 3-4 of 61)",
        "     3\tfrom __future__ import annotations",
        "     4\t",
    ]
    assert "past the end" in _error(env.read_file, "intervals/ops.py", start_line=500)
    assert "before start_line" in _error(env.read_file, "intervals/ops.py", start_line=5, end_line=2)
    assert "is a directory" in _error(env.read_file, "intervals")
    assert "does not exist" in _error(env.read_file, "nope.py")


def test_long_files_are_paged(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("\n".join(f"line {n}" for n in range(1, 1001)))
    out = fsops.read_file(str(tmp_path), "big.txt")
    assert "(lines 1-400 of 1000)" in out
    assert out.endswith("[... 600 more lines; call read_file with start_line=401 ...]")


def test_paths_outside_the_repository_are_refused(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    for path in ("../../x", "/etc/passwd", str(ENV_DIR / "hidden" / "intervals-1" / "gold.patch")):
        assert "outside the repository" in _error(env.read_file, path)
    assert "outside the repository" in _error(env.write_file, "../escape.py", "x = 1")
    assert env.read_file(str(Path(env._dirs.repo) / "README.md")).startswith("README.md")  # absolute, inside


def test_list_files_skips_git_and_caches(env: MiniSweEnvironment) -> None:
    env.reset(task_id="pagekit-1")
    listing = env.list_files().splitlines()
    assert "pagekit/paginator.py" in listing and "tests/" in listing
    assert not any(entry.startswith(".git") for entry in listing)
    assert env.list_files("tests").splitlines() == ["tests/test_paginator.py"]


def test_search_plain_regex_and_case(env: MiniSweEnvironment) -> None:
    env.reset(task_id="pagekit-1")
    out = env.search("num_pages", path="pagekit")
    assert out.splitlines()[0].endswith("in 1 file")
    assert "pagekit/paginator.py:45:     def num_pages(self) -> int:" in out
    assert env.search(r"def \w+_links\(self", regex=True).count("page_links") == 1
    assert "No matches" in env.search("PAGINATE(")
    assert "paginate(" in env.search("PAGINATE(", ignore_case=True)
    assert "invalid regular expression" in _error(env.search, "(", regex=True)


def test_edit_file_replaces_one_exact_snippet(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    out = env.edit_file("intervals/ops.py", "key=lambda iv: iv[1]", "key=lambda iv: iv[0]")
    assert out.startswith("Edited intervals/ops.py: replaced 1 occurrence (now lines 22-22).")
    assert "key=lambda iv: iv[0]" in env.read_file("intervals/ops.py", 22, 22)
    diff = env.run("git diff --stat")
    assert "intervals/ops.py | 2 +-" in diff


def test_edit_file_errors_are_clear(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    not_found = _error(env.edit_file, "intervals/ops.py", "def merge(intervals):", "x")
    assert "old_str was not found in intervals/ops.py" in not_found
    whitespace = _error(env.edit_file, "intervals/ops.py", "    for start, end in items:\nif merged", "x")
    assert "not found" in whitespace and "is at line 24" in whitespace
    many = _error(env.edit_file, "intervals/ops.py", "merge(", "x(")
    assert "occurs 6 times" in many and "more surrounding lines" in many
    assert "must not be empty" in _error(env.edit_file, "intervals/ops.py", "", "x")
    assert "are the same" in _error(env.edit_file, "intervals/ops.py", "merge", "merge")
    assert "use write_file to create it" in _error(env.edit_file, "new.py", "a", "b")


def test_edit_keeps_crlf_line_endings(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    env.write_file("dos.txt", "one\r\ntwo\r\nthree\r\n")
    env.edit_file("dos.txt", "one\ntwo", "uno\ndos")
    assert (Path(env._dirs.repo) / "dos.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_write_file_creates_and_overwrites(env: MiniSweEnvironment) -> None:
    env.reset(task_id="intervals-1")
    assert env.write_file("pkg/new/mod.py", "x = 1\n") == "Created pkg/new/mod.py (1 line, 6 bytes)."
    assert env.write_file("pkg/new/mod.py", "x = 2\ny = 3") == "Overwrote pkg/new/mod.py (2 lines, 11 bytes)."
    assert (Path(env._dirs.repo) / "pkg/new/mod.py").stat().st_uid == env._dirs.uid
    assert "is a directory" in _error(env.write_file, "pkg", "x")


def test_run_reports_output_and_exit_code(env: MiniSweEnvironment) -> None:
    env.reset(task_id="toktext-1")
    out = env.run("python -m pytest -q 2>&1 | tail -1; echo oops >&2; exit 3")
    assert "12 passed" in out and "[stderr]\noops" in out and out.endswith("[exit code 3]")
    assert env.run("pwd").splitlines()[0] == env._dirs.repo.as_posix()


def test_run_timeout_is_capped_and_kills(env: MiniSweEnvironment) -> None:
    env.reset(task_id="toktext-1")
    out = env.run("echo start; sleep 30", timeout_s=0.5)
    assert out.startswith("start") and "[timed out after" in out
    assert "must be positive" in _error(env.run, "true", timeout_s=0)


def test_submit_ends_the_episode(env: MiniSweEnvironment) -> None:
    assert "No episode is running" in _error(env.run, "true")
    env.reset(task_id="toktext-1")
    assert env.submit().startswith("Submitted.")
    assert env.episode_done and env.state.submitted
    assert "The episode is over" in _error(env.read_file, "README.md")
    env.reset(task_id="toktext-1")
    assert not env.episode_done and not env.state.submitted


def test_no_tool_returns_a_reward() -> None:
    schema = json.dumps(MiniSweEnvironment.tools_schema())
    hidden = {"run_tests", "run_agent", "snapshot_workspace", "restore_workspace"}
    assert not any(f'"{name}"' in schema for name in hidden) and "reward" not in schema
    assert set(MiniSweEnvironment.orchestrator_calls) == hidden


# --- run_tests and the grader --------------------------------------------------------------


def _grade_in_process(env: MiniSweEnvironment) -> tuple[float, dict]:
    """What `MiniSweGrader` gives, in this process: its score and evidence."""
    import asyncio

    grader = load_grader_module()

    class Local:  # the environment as the grader's `env` (the orchestrator's `call`)
        def call(self, name: str, **arguments):  # type: ignore[no-untyped-def]
            return getattr(env, name)(**arguments)

    state = env.state.model_dump()
    value, evidence = asyncio.run(grader.MiniSweGrader().resolved(state, Local()))
    return value, evidence


def test_run_tests_grades_the_library_code(env: MiniSweEnvironment) -> None:
    env.reset(task_id="pagekit-1")
    value, evidence = _grade_in_process(env)
    assert value == 0.0 and evidence["status"] == "ok" and evidence["exit_code"] == 1
    assert evidence["report"] == "complete" and evidence["tampering"] == []
    assert evidence["reason"].startswith("FAIL_TO_PASS not passed: 7 of 7 (7 failed)")
    env.edit_file("pagekit/paginator.py", "self.total_items // self.per_page", "-(-self.total_items // self.per_page)")
    env.write_file("tests/test_more.py", "def test_mine():\n    pass\n")  # a new test file: discarded
    value, evidence = _grade_in_process(env)
    assert value == 1.0, evidence["reason"]
    assert evidence["kept_changes"] == ["M pagekit/paginator.py"]
    assert evidence["discarded_changes"] == ["A tests/test_more.py"]
    assert "-(-self.total_items // self.per_page)" in evidence["diff"]


def test_an_edited_test_file_scores_zero_even_with_the_fix(env: MiniSweEnvironment) -> None:
    env.reset(task_id="pagekit-1")
    env.edit_file("pagekit/paginator.py", "self.total_items // self.per_page", "-(-self.total_items // self.per_page)")
    env.write_file("tests/test_paginator.py", "def test_nothing():\n    pass\n")
    value, evidence = _grade_in_process(env)
    assert value == 0.0 and evidence["tampering"] == ["test file edited: tests/test_paginator.py"]
    assert set(evidence["PASS_TO_PASS"].values()) == {"passed"}  # the host's copy ran
    assert "tampering: test file edited: tests/test_paginator.py" in evidence["reason"]


def test_run_tests_skips_symlinks_and_conftest_in_the_package(env: MiniSweEnvironment) -> None:
    env.reset(task_id="pagekit-1")
    env.run("ln -s /etc/hostname pagekit/leak.txt && mkfifo pagekit/pipe")
    env.write_file("pagekit/conftest.py", "raise SystemExit('never loaded')\n")
    value, result = _grade_in_process(env)
    assert result["status"] == "ok" and value == 0.0
    assert "A pagekit/conftest.py" in result["discarded_changes"]
    assert "pagekit/conftest.py" in result["skipped_files"] and "pagekit/leak.txt" in result["skipped_files"]
    assert result["tampering"] == ["conftest.py added or changed: pagekit/conftest.py"]


def test_a_package_folder_replaced_by_a_symlink_is_not_followed(env: MiniSweEnvironment) -> None:
    """The fixed package moved to home/ and linked back: the link is not followed, nothing is graded."""
    env.reset(task_id="pagekit-1")
    env.edit_file("pagekit/paginator.py", "self.total_items // self.per_page", "-(-self.total_items // self.per_page)")
    assert env.run("mv pagekit ../home/pagekit && ln -s ../home/pagekit pagekit && python -m pytest -q").endswith(
        "[exit code 0]"
    )  # the agent's own run follows the link and passes
    value, result = _grade_in_process(env)
    assert value == 0.0 and result["status"] == "ok" and "pagekit/" in result["skipped_files"]
    assert "passed" not in set(result["FAIL_TO_PASS"].values())


@pytest.mark.parametrize(
    ("source", "message"),
    [("pagekit/sub", "must be a module file"), ("json", "'json' would shadow"), ("..", "must be a relative path")],
)
def test_run_tests_refuses_a_source_path_that_is_not_a_package_folder(
    env: MiniSweEnvironment, source: str, message: str
) -> None:
    env.reset(task_id="pagekit-1")
    with pytest.raises(ValueError, match=message):
        env.run_tests(files={}, source_paths=[source], node_ids=[])


def test_run_tests_without_an_episode() -> None:
    result = MiniSweEnvironment().run_tests(files={}, source_paths=["x"], node_ids=["tests/t.py::t"])
    assert result["status"] == "no_episode" and result["outcomes"] == {"tests/t.py::t": "not run"}


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../b", ""])
def test_run_tests_refuses_paths_outside_the_tree(env: MiniSweEnvironment, path: str) -> None:
    env.reset(task_id="pagekit-1")
    with pytest.raises(ValueError, match="must be a relative path"):
        env.run_tests(files={path: "x"}, source_paths=["pagekit"], node_ids=[])
    with pytest.raises(ValueError):
        check_relative_path(path, "file")


def test_diff_trees_lists_changes() -> None:
    changes, diff = diff_trees({"a.py": b"x\n", "b.py": b"y\n"}, {"a.py": b"z\n", "c.py": b"w\n"})
    assert changes == ["M a.py", "D b.py", "A c.py"]
    assert "-x\n+z\n" in diff


def test_bases_of_dead_servers_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / "mini_swe-stale"
    (stale / "s-1" / "repo" / "pkg").mkdir(parents=True)
    (stale / "owner").write_text("999999999 12345")  # no such process
    alive = tmp_path / "mini_swe-alive"
    alive.mkdir()
    (alive / "owner").write_text(_process_identity(os.getpid()) or "")
    foreign = tmp_path / "mini_swe-not-ours"
    foreign.mkdir()  # no owner file: left alone
    fresh = SandboxHost(Sandbox(), root=tmp_path)
    try:
        assert not stale.exists() and alive.exists() and foreign.exists() and fresh.base.is_dir()
        assert (fresh.base / "owner").read_text() == _process_identity(os.getpid())
    finally:
        fresh._finalizer()
    assert not fresh.base.exists()


# --- the workspace checks ----------------------------------------------------------------------


def test_workspace_tampering_names_each_sign() -> None:
    pristine = {"pkg/a.py": b"x", "tests/test_a.py": b"t", "tests/test_b.py": b"u", "pyproject.toml": b"[tool.pytest.ini_options]\n"}
    host_files = {"tests/test_a.py": "t", "tests/test_b.py": "u", "tests/test_hidden.py": "h", "pyproject.toml": "[tool.pytest.ini_options]\n"}
    current = {
        "pkg/a.py": b"fixed",
        "tests/test_a.py": b"edited",
        "tests/test_hidden.py": b"guessed",  # not the agent's to know: discarded, not a sign
        "tests/test_new.py": b"mine",
        "conftest.py": b"",
        "pkg/x.pth": b"",
        "sitecustomize.py": b"",
        "setup.cfg": b"[tool:pytest]\n",
        "pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-p x'\n",
    }
    assert workspace_tampering(current, pristine, host_files) == [
        "test file edited: tests/test_a.py",
        "test file deleted: tests/test_b.py",
        "conftest.py added or changed: conftest.py",
        "interpreter startup file planted: pkg/x.pth",
        "pytest configuration added or changed: pyproject.toml [tool.pytest]",
        "pytest configuration added or changed: setup.cfg",
        "interpreter startup file planted: sitecustomize.py",
    ]
    untouched = {**pristine, "pkg/a.py": b"fixed", "README.md": b"notes"}
    assert workspace_tampering(untouched, pristine, host_files) == []
