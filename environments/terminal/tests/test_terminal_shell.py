"""The environment in-process: episodes, the persistent shell, the tools, limits, and run_checks."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openenv_sdk import ToolFailure

sys.path.insert(0, str(Path(__file__).resolve().parent))

from terminal_testkit import IS_ROOT, terminal_env, terminal_grader

TerminalEnvironment = terminal_env.TerminalEnvironment


@pytest.fixture
def env() -> Iterator[TerminalEnvironment]:
    environment = TerminalEnvironment()
    environment.reset(task_id="csv_column_sum")
    yield environment
    environment.close()


def output(text: str) -> str:
    """A rendered result without its `[exit code N]` line."""
    return text.rsplit("\n[exit code", 1)[0] if "\n[exit code" in text else text.rsplit("[exit code", 1)[0]


# --- episodes ------------------------------------------------------------------------------


def test_a_seed_picks_the_same_task_and_task_id_wins() -> None:
    a, b = TerminalEnvironment(), TerminalEnvironment()
    try:
        assert a.reset(seed=11).task_id == b.reset(seed=11).task_id
        assert b.reset(seed=11, task_id="top_ips").task_id == "top_ips"
        assert len({a.reset(seed=s).task_id for s in range(8)}) > 1  # seeds spread
    finally:
        a.close()
        b.close()


def test_unknown_task_and_unknown_fields_are_refused_with_the_fix() -> None:
    environment = TerminalEnvironment()
    with pytest.raises(ValueError, match=r"unknown task_id 'top_ip'\. Did you mean 'top_ips'\?"):
        environment.reset(task_id="top_ip")
    with pytest.raises(ValueError, match=r"task_id must be a string such as 'clean_tmp_files', got 3"):
        environment.reset(task_id=3)
    with pytest.raises(ValueError, match=r"unknown reset field\(s\) \['difficulty'\]"):
        environment.reset(task_id="top_ips", difficulty="easy")


def test_the_first_observation_has_the_prompt_the_tools_and_the_workspace() -> None:
    environment = TerminalEnvironment()
    try:
        obs = environment.reset(task_id="git_merge_conflict")
        assert obs.task_id == "git_merge_conflict" and "greeting.txt" in obs.prompt
        assert obs.workdir.endswith("/work") and Path(obs.workdir).is_dir()
        for word in ("bash(command", "read_file(path)", "write_file(path, content)", "submit()", obs.workdir):
            assert word in obs.instructions
        state = environment.state
        assert (state.task_id, state.category, state.difficulty) == ("git_merge_conflict", "git", "hard")
        assert output(environment.bash("git -C repo status --short")).splitlines() == ["A  FEATURE.md", "UU greeting.txt"]
    finally:
        environment.close()


def test_each_reset_gets_a_fresh_workspace_and_close_removes_it(env: TerminalEnvironment) -> None:
    first = Path(env.state.workdir)
    env.bash("echo scribble > mine.txt")
    env.reset(task_id="csv_column_sum")
    second = Path(env.state.workdir)
    assert not first.exists() and second != first
    assert sorted(p.name for p in second.iterdir()) == ["sales.csv"]
    if IS_ROOT:  # a uid of the session's own: the workspace is root's, shared through its group
        uid = env._sandbox.uid
        assert uid not in (0, os.getuid()) and (second.stat().st_uid, second.stat().st_gid) == (0, uid)
        assert (second / "sales.csv").stat().st_uid == uid
        assert output(env.bash("id -un; id -u")) == f"agent\n{uid}"
    env.close()
    assert not second.parent.exists()


def test_each_episode_has_a_uid_of_its_own_and_its_own_tmp() -> None:
    a, b = TerminalEnvironment(), TerminalEnvironment()
    try:
        a.reset(task_id="csv_column_sum")
        b.reset(task_id="csv_column_sum")
        if IS_ROOT:
            assert output(a.bash("id -u")) != output(b.bash("id -u"))
        a.bash("echo mine > /tmp/note; cd /tmp")
        assert output(a.bash("cat note; pwd")) == "mine\n/tmp"  # /tmp persists through the episode
        assert "No such file" in b.bash("cat /tmp/note")  # and is the episode's own
    finally:
        a.close()
        b.close()


def test_calls_before_reset_and_after_submit_are_refused() -> None:
    environment = TerminalEnvironment()
    with pytest.raises(ToolFailure, match="no episode"):
        environment.bash("ls")
    environment.reset(task_id="csv_column_sum")
    try:
        assert environment.submit() == "Submitted. The episode is over."
        assert environment.episode_done and environment.state.submitted
        with pytest.raises(ToolFailure, match=r"the episode is over \(submitted\)"):
            environment.bash("ls")
        files = terminal_grader.check_files("csv_column_sum")
        assert environment.run_checks(files, terminal_grader.CHECK_COMMAND, 30.0)["exit_code"] == 1
    finally:
        environment.close()


# --- the persistent shell ------------------------------------------------------------------


def test_cwd_variables_and_functions_carry_over_between_calls(env: TerminalEnvironment) -> None:
    root = env.state.workdir
    env.bash("mkdir -p 'a dir/b' && cd 'a dir/b' && export GREETING='hi there\nsecond line' && PLAIN=1 && arr=(x y z)")
    env.bash("shout() { echo \"$1!\"; }; declare -i N=41; N+=1")
    assert output(env.bash("pwd")) == f"{root}/a dir/b"
    assert output(env.bash('echo "$GREETING"; echo $PLAIN ${arr[2]} $N; shout hey')) == "hi there\nsecond line\n1 z 42\nhey!"
    assert output(env.bash("env | grep -c '^GREETING='; env | grep -c '^PLAIN='")) == "1\n0"  # exported stays exported
    env.bash("unset GREETING; cd ..")
    assert output(env.bash('echo "[${GREETING-gone}]"; pwd')) == f"[gone]\n{root}/a dir"


def test_the_exit_status_and_the_state_survive_exit_and_errors(env: TerminalEnvironment) -> None:
    assert env.bash("cd /tmp; exit 3").endswith("[exit code 3]")
    assert output(env.bash("pwd")) == "/tmp"
    result = env.bash("echo unclosed (")
    assert "syntax error" in result and result.endswith("[exit code 2]")
    assert env.bash("false").endswith("[exit code 1]")
    assert output(env.bash("pwd")) == "/tmp"


def test_a_killed_command_leaves_the_shell_as_it_was(env: TerminalEnvironment) -> None:
    root = env.state.workdir
    started = time.monotonic()
    result = env.bash("cd /tmp; export LOST=1; while true; do :; done", timeout_s=1)
    assert "[timed out after" in result and time.monotonic() - started < 5
    assert output(env.bash('pwd; echo "${LOST-unset}"')) == f"{root}\nunset"


def test_a_deleted_working_directory_is_reported_and_the_shell_goes_back_to_the_root(env: TerminalEnvironment) -> None:
    root = env.state.workdir
    env.bash("mkdir -p gone/deeper && cd gone/deeper && rm -rf ../../gone")
    result = env.bash("pwd")
    assert f"[note: the working directory {root}/gone/deeper no longer exists" in result
    assert output(result).splitlines()[0] == root
    env.bash('rm -rf "$PWD"/* && cd / && rm -rf "$OLDPWD" 2>/dev/null; true')  # the root itself, if it can
    assert output(env.bash("cd - >/dev/null; pwd; ls | wc -l")).splitlines()[-1] == "0"
    assert output(env.bash("echo still working")) == "still working"


def test_background_processes_end_with_their_command_even_in_a_new_session(env: TerminalEnvironment) -> None:
    tag = f"oe-bg-{os.getpid()}-{time.monotonic_ns()}"
    env.bash(f"setsid bash -c 'exec -a {tag}-a sleep 300' >/dev/null 2>&1 < /dev/null & echo $!")
    env.bash(f"nohup bash -c 'exec -a {tag}-b sleep 301' >/dev/null 2>&1 & disown; echo $!")
    env.bash(f"setsid env -i bash -c 'exec -a {tag}-c sleep 302' >/dev/null 2>&1 < /dev/null &")
    assert _settled(lambda: _host_processes_named(tag)) == []


def test_a_fork_bomb_and_a_flood_cost_one_call_and_leave_nothing_running(
    env: TerminalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = terminal_env.manifest()
    small = manifest.model_copy(update={"sandbox": terminal_env.sandbox_settings().model_copy(update={"max_processes": 32})})
    monkeypatch.setattr(terminal_env, "manifest", lambda: small)
    env.reset(task_id=env.state.task_id)  # a sandbox made with the smaller limit
    started = time.monotonic()
    bomb = env.bash(":(){ :|:& };:", timeout_s=5)
    assert time.monotonic() - started < 10
    assert "Resource temporarily unavailable" in bomb or "[timed out after" in bomb
    flood = env.bash("head -c 1000000000 /dev/zero | tr '\\0' y")
    assert "bytes truncated ...]" in flood and "[killed: output exceeded" in flood
    if IS_ROOT:  # nothing of the session's uid outlives the commands
        assert _settled(lambda: _host_processes_of(env._sandbox.uid)) == []
    assert output(env.bash("echo alive")) == "alive"


def _settled(find: Callable[[], list[int]], deadline_s: float = 3.0) -> list[int]:
    """`find()` once it is empty, or what it still finds at the deadline (killed processes take a moment to go)."""
    end = time.monotonic() + deadline_s
    while (found := find()) and time.monotonic() < end:
        time.sleep(0.02)
    return found


def _host_processes_named(tag: str) -> list[int]:
    """Live processes on the host whose command line holds `tag`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if tag.encode() in Path(entry.path, "cmdline").read_bytes():
                    if "\nState:\tZ" not in Path(entry.path, "status").read_text():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def _host_processes_of(uid: int) -> list[int]:
    """Live processes on the host whose real uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(entry.path, "status").read_text()
            except OSError:
                continue
            uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
            if uid_line.split()[1:2] == [str(uid)] and "\nState:\tZ" not in status:
                found.append(int(entry.name))
    return found


def test_a_long_command_is_refused_before_it_runs(env: TerminalEnvironment) -> None:
    with pytest.raises(ToolFailure, match="the limit is 100000"):
        env.bash("echo " + "x" * 100_001)
    with pytest.raises(ToolFailure, match="NUL"):
        env.bash("echo \0")
    with pytest.raises(ToolFailure, match="timeout_s must be positive"):
        env.bash("true", timeout_s=0)


def test_git_and_python_are_there_and_nothing_waits_for_a_terminal(env: TerminalEnvironment) -> None:
    assert output(env.bash("python3 -c 'print(6*7)'")) == "42"
    env.bash("git init -q -b main r && cd r && echo x > f && git add f && git commit -q -m one")
    assert output(env.bash("git log --format='%an <%ae> %s'")) == "Agent <agent@example.com> one"
    assert env.bash("git commit --amend").endswith("[exit code 0]")  # GIT_EDITOR=true: no editor hangs
    assert output(env.bash("cat")) == ""  # stdin is empty


# --- read_file / write_file ----------------------------------------------------------------


def test_write_then_read_a_file_relative_to_the_shell_cwd(env: TerminalEnvironment) -> None:
    env.bash("mkdir sub && cd sub")
    text = "line one\n'quotes' and \"double\" $HOME `ticks`\n"
    assert env.write_file("deep/er/notes.txt", text) == f"wrote {len(text.encode())} bytes to deep/er/notes.txt"
    assert env.read_file("deep/er/notes.txt") == text
    assert output(env.bash("cat ../sub/deep/er/notes.txt | wc -l")) == "2"
    with pytest.raises(ToolFailure, match="cannot read 'missing.txt'.*No such file"):
        env.read_file("missing.txt")


@pytest.mark.skipif(not IS_ROOT, reason="without root the tools run as the server's own user")
def test_files_are_read_and_written_with_the_agents_rights() -> None:
    environment = TerminalEnvironment()
    environment.reset(task_id="csv_column_sum")
    try:
        with pytest.raises(ToolFailure, match="Read-only file system|Permission denied"):
            environment.write_file("/etc/openenv-terminal-test", "x")
        with pytest.raises(ToolFailure, match="Permission denied"):
            environment.read_file("/etc/shadow")
        assert not Path("/etc/openenv-terminal-test").exists()
    finally:
        environment.close()


# --- run_checks ----------------------------------------------------------------------------


def test_checks_run_on_a_copy_in_a_fresh_folder_that_is_removed_afterwards(env: TerminalEnvironment) -> None:
    env.bash("echo 1575 > eu_total.txt && chmod 640 eu_total.txt && ln -s sales.csv link")
    probe = (
        'echo "cwd=$PWD"; ls -la | grep -c link; stat -c %a eu_total.txt; ls "$CHECK_DIR"; '
        'echo tampered > eu_total.txt; touch "$CHECK_DIR/new" 2>/dev/null && echo wrote-check || echo check-read-only'
    )
    result = env.run_checks({"check.sh": "true\n", "data/extra.txt": "x"}, probe, 30.0)
    lines = result["output"].splitlines()
    workdir = env.state.workdir
    assert lines[0].startswith("cwd=") and lines[0] != f"cwd={workdir}" and lines[0].endswith("/work")
    assert lines[1:4] == ["1", "640", "check.sh"]  # symlinks and modes are copied
    assert lines[4] == "data"
    assert lines[5] == "check-read-only"  # mounted read-only
    assert not Path(lines[0][4:]).exists()  # the grading folder is gone
    assert Path(workdir, "eu_total.txt").read_text() == "1575\n"  # the workspace itself is untouched


def test_the_check_passes_or_fails_with_its_evidence(env: TerminalEnvironment) -> None:
    files = terminal_grader.check_files("csv_column_sum")
    failing = env.run_checks(files, terminal_grader.CHECK_COMMAND, 30.0)
    assert (failing["exit_code"], failing["passed"]) == (1, [])
    assert failing["failed"] == ["eu_total.txt holds the EU total (1575) (no file eu_total.txt)"]
    env.bash("awk -F, '$2 == \"EU\" { t += $4 } END { print t }' sales.csv > eu_total.txt")
    passing = env.run_checks(files, terminal_grader.CHECK_COMMAND, 30.0)
    assert (passing["exit_code"], passing["failed"]) == (0, [])
    assert "RESULT: every condition holds" in passing["output"]


def test_check_file_names_and_timeouts_are_validated(env: TerminalEnvironment) -> None:
    for bad in ("../escape.sh", "/etc/x", ""):
        with pytest.raises(ValueError, match="relative paths inside the check folder"):
            env.run_checks({bad: "x"}, "true", 10.0)
    with pytest.raises(ValueError, match=r"timeout_s must be in \(0, 600\]"):
        env.run_checks({"check.sh": "x"}, "true", 0)
    slow = env.run_checks({"check.sh": "x"}, "sleep 5", 0.5)
    assert slow["timed_out"] and slow["exit_code"] == 124


def test_the_state_never_holds_a_reward_or_the_check(env: TerminalEnvironment) -> None:
    env.run_checks(terminal_grader.check_files("csv_column_sum"), terminal_grader.CHECK_COMMAND, 30.0)
    dumped = env.state.model_dump_json()
    for word in ("reward", "score", "PASS", "FAIL", "1575", "check"):
        assert word not in dumped


def test_the_check_runs_under_another_uid_than_the_agent_with_nothing_of_the_agents_running(
    env: TerminalEnvironment,
) -> None:
    env.bash("setsid bash -c 'exec -a oe-lurker sleep 300' >/dev/null 2>&1 < /dev/null &")
    result = env.run_checks({"check.sh": "x"}, "id -u; ps -eo args | grep -c '^oe-lurker'", 30.0)
    check_uid, lurkers = result["output"].splitlines()[:2]
    if IS_ROOT:
        assert check_uid != output(env.bash("id -u"))
    assert lurkers == "0"
