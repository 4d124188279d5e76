"""Checkpoint, restore and fork continue an episode byte for byte, at 100 random cut points.

For each of wordle, terminal and mini_swe, a scripted episode is played once, uninterrupted, on
a real server (the reference): at each cut point k (drawn at random, seeded) it is checkpointed
after its k-th action, and for some cut points also forked then. The forks play the remaining
actions on the same server; then the server stops, a new one starts on the same checkpoint
store, and every other checkpoint is restored there and plays the remaining actions. Each
copy's observations (their JSON, byte for byte) and final grade (value and parts, as JSON) must
equal the reference's. 60 + 25 + 15 = 100 cut points.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk import create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import import_ref, load_environment
from openenv_sdk.rubric import grade
from openenv_sdk.server import ServerConfig
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "environments"


def _wordle_script() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    # invalid words and a repeated guess too: every branch of the game's messages
    guesses = ["crane", "zzzzz", "slate", "abc", "pious", "crane", "mould", "fight", "brown", "dwarf"]
    return {"task_id": 17}, [{"guess": g} for g in guesses]


def _terminal_script() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    solution = (ENVS / "terminal" / "hidden" / "env_merge" / "solution.sh").read_text()

    def bash(command: str) -> dict[str, Any]:
        return {"tool": "bash", "arguments": {"command": command}}

    return {"task_id": "env_merge"}, [
        bash("ls -la | awk '{print $1, $5, $NF}' | sort"),
        bash("mkdir -p scratch/deep && cd scratch/deep && N=7 && f() { echo \"f:$1:$N\"; }"),
        bash("f one; pwd | sed 's#.*/work#<work>#'; echo $N"),
        {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "cut here\nand there\n"}},
        bash("cd ../..; export MARK=m1; cat scratch/deep/notes.txt; ln -s scratch/deep/notes.txt link"),
        bash("echo $MARK; f two; readlink link; cat link; mkfifo pipe && ls -l pipe | cut -c1"),
        {"tool": "read_file", "arguments": {"path": "defaults.env"}},
        bash("echo tmp > $TMPDIR/t && cat $TMPDIR/t; echo home > ~/h && cat ~/h"),
        bash(solution),
        bash("rm -rf scratch link pipe; ls -a; cat ~/h $TMPDIR/t"),
        {"tool": "submit", "arguments": {}},
        bash("echo after submit"),
    ]


def _mini_swe_script() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    patch = (ENVS / "mini_swe" / "hidden" / "cronlite-1" / "gold.patch").read_text()

    def run(command: str) -> dict[str, Any]:
        return {"tool": "run", "arguments": {"command": command}}

    return {"task_id": "cronlite-1"}, [
        {"tool": "list_files", "arguments": {}},
        run("git status --short; echo one > scratch.txt"),
        {"tool": "search", "arguments": {"pattern": "def "}},
        {"tool": "write_file", "arguments": {"path": ".gold.patch", "content": patch}},
        run("git apply --check .gold.patch && echo applies"),
        run("cat scratch.txt; echo two >> scratch.txt; git status --short"),
        run("git apply .gold.patch && rm .gold.patch scratch.txt; git diff --stat"),
        {"tool": "read_file", "arguments": {"path": "README.md", "end_line": 5}},
        {"tool": "submit", "arguments": {}},
    ]


CASES = {
    # environment: (script, grader, cut points, of which forked on the first server)
    "wordle": (_wordle_script, "grader:WordleGrader", 60, 20),
    "terminal": (_terminal_script, "grader:TerminalGrader", 25, 8),
    "mini_swe": (_mini_swe_script, "grader:MiniSweGrader", 15, 5),
}


def _observed(result: Any) -> str:
    """A step's reply as JSON text (what is compared byte for byte)."""
    return json.dumps({"observation": result.observation, "reward": result.reward, "done": result.done}, sort_keys=True)


def _graded(grader: Any, client: GenericEnvClient) -> str:
    score = grade(grader, client)
    return json.dumps({"value": score.value, "components": score.components}, sort_keys=True)


@pytest.mark.timeout(600)  # mini_swe grades 16 episodes with its hidden tests: ~50 s here, more on a loaded machine
@pytest.mark.parametrize("name", list(CASES))
def test_continuations_are_byte_identical(name: str, tmp_path: Path) -> None:
    script, grader_ref, n_cuts, n_forked = CASES[name]
    folder = ENVS / name
    env_cls = load_environment(folder).env_cls
    assert env_cls is not None
    grader = import_ref(folder, grader_ref, what="grader")()
    reset_kwargs, actions = script()
    rng = random.Random(f"cut-points-{name}")
    cuts = sorted(rng.randrange(len(actions)) for _ in range(n_cuts))  # after action k (0: right after reset)
    forked_at = set(rng.sample(range(n_cuts), n_forked))
    config = ServerConfig(checkpoint_dir=str(tmp_path / "store"))

    reference: list[str] = []
    handles: list[tuple[int, str]] = []  # (cut index, handle) restored after the restart
    forks: list[tuple[int, GenericEnvClient]] = []
    with serve_app(create_app(env_cls, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(**reset_kwargs)
        for k in range(len(actions) + 1):
            for i in (i for i, cut in enumerate(cuts) if cut == k):
                if i in forked_at:
                    forks.append((i, env.fork(1)[0]))
                else:
                    handles.append((i, env.checkpoint().handle))
            if k < len(actions):
                reference.append(_observed(env.step(actions[k])))
        reference_grade = _graded(grader, env)
        try:
            for i, copy in forks:
                with copy:
                    continued = [_observed(copy.step(a)) for a in actions[cuts[i] :]]
                    assert continued == reference[cuts[i] :], f"fork at cut {cuts[i]} diverged"
                    assert _graded(grader, copy) == reference_grade, f"fork at cut {cuts[i]} graded differently"
        finally:
            for _, copy in forks:
                copy.close()

    # a new server on the same store: every other checkpoint continues there
    with serve_app(create_app(env_cls, config=config)) as url:
        for i, handle in handles:
            with GenericEnvClient(url) as copy:
                copy.restore(handle)
                continued = [_observed(copy.step(a)) for a in actions[cuts[i] :]]
                assert continued == reference[cuts[i] :], f"restore at cut {cuts[i]} (after a restart) diverged"
                assert _graded(grader, copy) == reference_grade, f"restore at cut {cuts[i]} graded differently"
    assert len(handles) + len(forks) == n_cuts
    if name != "wordle":  # the script solves the task: a copy that lost the workspace would grade 0
        assert json.loads(reference_grade)["value"] == 1.0
