"""An agent that attacks through its tools (over MCP, as an agent would) gets nowhere.

The server runs from a copy of the folder without hidden/, as in the image. The agent tries to
read the checks, to write the grader's files, to find its reward, to outlive its commands and
watch the grading, and to take the server down; whatever it does costs that one tool call.
Every command runs in the episode's sandbox (tests/security/test_attack_terminal.py holds the
attacks between sessions and on the grading).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from terminal_testkit import ENV_DIR, client_of, terminal_grader

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import ToolCallError
from openenv_sdk.rubric import grade

CANARY = "__failed=$((__failed + 1))"  # a line of hidden/lib.sh, in no public file


class Served:
    def __init__(self, folder: Path, owner: GenericEnvClient) -> None:
        self.folder = folder
        self.owner = owner
        assert owner.base_url is not None and owner.provider is not None
        self.base_url: str = owner.base_url
        self.pid: int = owner.provider.pid  # type: ignore[attr-defined]

    def client(self) -> GenericEnvClient:
        return client_of(self.owner)

    def healthy(self) -> bool:
        return httpx.get(f"{self.base_url}/health", timeout=5).status_code == 200


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """The environment served from a copy without hidden/ and tests/, world-readable like the image's /env."""
    root = Path(tempfile.mkdtemp(prefix="openenv-terminal-image-"))
    root.chmod(0o755)
    folder = root / "terminal"
    shutil.copytree(ENV_DIR, folder, ignore=shutil.ignore_patterns("hidden", "tests", "__pycache__"))
    manifest = folder / "openenv.yaml"  # a small process cap: the fork bomb must not crowd a shared test machine
    manifest.write_text(manifest.read_text().replace("max_processes: 128", "max_processes: 32"))
    try:
        with GenericEnvClient(env_dir=folder) as owner:
            owner.connect()
            yield Served(folder, owner)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bash(client: GenericEnvClient, command: str, **kwargs: Any) -> str:
    result = client.call_tool("bash", command=command, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def test_the_agent_has_its_four_tools_and_no_way_to_the_graders_calls(served: Served) -> None:
    with served.client() as client:
        client.reset(task_id="count_log_files")
        assert [t.name for t in client.list_tools()] == ["bash", "read_file", "write_file", "submit"]
        for name in ("run_checks", "transcript", "reset", "state"):
            with pytest.raises(ToolCallError):
                client.call_tool(name, files={"check.sh": "exit 0"}, command="true")
        assert "reward" not in str(client.reset(task_id="count_log_files").observation).lower()


def test_the_agent_finds_no_check_anywhere_it_can_look(served: Served) -> None:
    with served.client() as client:
        client.reset(task_id="count_log_files")
        bash(client, "echo 8 > count.txt")
        score = grade(terminal_grader.TerminalGrader(), client)  # a check ran in this session
        assert score.value == 1.0
        folder = bash(client, f"tr '\\0' ' ' < /proc/{served.pid}/cmdline 2>&1")
        assert str(served.folder) not in folder  # the server's process is not in the agent's world
        listing = bash(client, f"ls -a {served.folder} 2>&1")
        assert "No such file" in listing and "grader.py" not in listing  # nor is its folder
        found = bash(client, f"grep -rlF '{CANARY}' / --exclude-dir=proc --exclude-dir=usr 2>/dev/null; echo end")
        assert found.startswith("end"), found
        parent = bash(client, 'ls -a "$(dirname "$(dirname "$PWD")")" 2>&1; echo end')
        assert len(parent.splitlines()) == 5 and "grade" not in parent  # ., .., its own folder, end, [exit code 0]
        evidence = bash(client, f"cat /proc/{served.pid}/environ 2>&1 | head -c 300; echo")
        assert "No such file" in evidence


def test_the_agent_cannot_write_the_environment_or_the_graders_files(served: Served) -> None:
    with served.client() as client:
        client.reset(task_id="count_log_files")
        for target in (served.folder / "grader.py", served.folder / "terminal_env.py", ENV_DIR / "hidden" / "lib.sh"):
            before = target.read_bytes()
            out = bash(client, f"echo 'exit 0' > {target} 2>&1; echo 'exit 0' >> {target}; echo end")
            assert "No such file or directory" in out
            assert target.read_bytes() == before
        bash(client, f"mkdir -p {served.folder}/hidden 2>&1; echo end")  # made, if at all, in its own world
        assert not (served.folder / "hidden").exists()


def test_a_process_left_behind_cannot_watch_or_change_the_grading(served: Served) -> None:
    """The lurker leaves its command's process session, to copy or overwrite any check it sees."""
    tag = f"oe-lurker-{time.monotonic_ns()}"
    lurker = (
        "while :; do for d in /var/tmp/openenv-terminal-grade-* /tmp/openenv-terminal-grade-*; do\n"
        '  cp -r "$d" "$HOME/loot" 2>/dev/null; echo "echo 8 > count.txt" > "$d/check/check.sh" 2>/dev/null\n'
        "done; sleep 0.01; done\n"
    )
    with served.client() as client:
        client.reset(task_id="count_log_files")
        client.call_tool("write_file", path="/tmp/lurk.sh", content=lurker)
        bash(client, f"setsid bash -c 'exec -a {tag} bash /tmp/lurk.sh' >/dev/null 2>&1 < /dev/null &")
        assert _settled(tag) == []
        score = grade(terminal_grader.TerminalGrader(), client)
        assert score.value == 0.0  # the real check ran: count.txt was never written
        assert "No such file" in bash(client, 'ls "$HOME/loot" 2>&1')


def test_a_process_that_clears_its_environment_is_gone_too(served: Served) -> None:
    tag = f"oe-cleared-{time.monotonic_ns()}"
    with served.client() as client:
        client.reset(task_id="count_log_files")
        bash(client, f"env -i setsid bash -c 'exec -a {tag} sleep 300' >/dev/null 2>&1 < /dev/null &")
        assert _settled(tag) == []


def test_nothing_the_agent_reaches_holds_its_reward(served: Served) -> None:
    with served.client() as client:
        first = client.reset(task_id="csv_column_sum")
        assert first.reward is None
        step = client.step({"tool": "bash", "arguments": {"command": "echo 1575 > eu_total.txt"}})
        assert step.reward is None
        score = grade(terminal_grader.TerminalGrader(), client)
        assert score.value == 1.0 and score.evidence["check_passes"]["passed"]
        seen = bash(client, 'env; cat "$HOME"/* 2>/dev/null; ls -la "$HOME" "$TMPDIR"; find . -newer eu_total.txt')
        for word in (CANARY, "every condition holds", "PASS:", "check_passes", "1.0"):
            assert word not in seen
        state = client.state()
        assert not {"reward", "score", "passed", "evidence"} & set(state)


def test_the_agent_cannot_signal_the_server(served: Served) -> None:
    with served.client() as client:
        client.reset(task_id="count_log_files")
        for signal_name in ("KILL", "TERM", "STOP"):
            out = bash(client, f"kill -{signal_name} {served.pid} 2>&1; echo status=$?")
            assert "No such process" in out and "status=1" in out  # not in the agent's pid namespace
        assert "Operation not permitted" in bash(client, "kill -KILL 1 2>&1; true")  # its namespace's init is root's
        assert served.healthy()
        assert "[exit code 0]" in bash(client, "true")


def test_abuse_costs_one_tool_call_and_other_sessions_go_on(served: Served) -> None:
    with served.client() as client, served.client() as other:
        client.reset(task_id="count_log_files")
        other.reset(task_id="csv_column_sum")
        results: dict[str, str] = {}

        def neighbour() -> None:  # another episode works on while this one misbehaves
            time.sleep(0.5)
            results["other"] = bash(other, "awk -F, '$2 == \"EU\" { t += $4 } END { print t }' sales.csv > eu_total.txt; cat eu_total.txt")

        thread = threading.Thread(target=neighbour)
        thread.start()
        bomb = bash(client, ":(){ :|:& };:", timeout_s=4)
        thread.join(30)
        assert "[timed out after" in bomb or "Resource temporarily unavailable" in bomb
        assert results["other"].startswith("1575")
        assert grade(terminal_grader.TerminalGrader(), other).value == 1.0

        started = time.monotonic()
        assert "[timed out after" in bash(client, "while true; do :; done", timeout_s=1)
        assert time.monotonic() - started < 10
        flood = bash(client, "head -c 1000000000 /dev/zero | tr '\\0' x")
        assert "bytes truncated ...]" in flood and "[killed: output exceeded" in flood
        assert len(flood) < 40_000
        gone = bash(client, "mkdir -p d && cd d && rm -rf ../d")
        assert "[exit code 0]" in gone
        after = bash(client, "pwd; find logs -type f -name '*.log' | wc -l > count.txt")
        assert "no longer exists" in after
        assert grade(terminal_grader.TerminalGrader(), client).value == 1.0  # the episode went on
        assert served.healthy()


def test_the_client_gets_a_clear_error_when_the_episode_cannot_go_on(served: Served) -> None:
    with served.client() as client:
        client.reset(task_id="count_log_files")
        assert client.call_tool("submit").content[0].text == "Submitted. The episode is over."
        refused = client.call_tool("bash", command="ls")
        assert refused.is_error and "the episode is over (submitted)" in refused.content[0].text
        step = client.step({"tool": "bash", "arguments": {"command": "ls"}})
        assert step.done and step.observation["error"]["error_type"] == "execution_error"
        client.reset(task_id="count_log_files")
        assert "[exit code 0]" in bash(client, "ls")  # a new episode starts cleanly


def _settled(tag: str, deadline_s: float = 3.0) -> list[int]:
    """Host processes whose command line holds `tag`, once there are none or at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if tag.encode() in Path(entry.path, "cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    continue
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.02)
