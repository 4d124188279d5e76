"""trusted_git: git on an agent's repository runs nothing the agent wrote and reports the truth.

Each case plants one thing in a real repository (config, attributes, hooks, index bits, history
files) that makes plain `git status` run a program or hide a change; trusted git must run no
program (a marker file would appear) and must report the modified file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_sdk.grading import trusted_git
from openenv_sdk.grading.trusted_git import NotARepository, run_git

SCRIPT = Path(trusted_git.__file__)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "a@example.com")
    git(repo, "config", "user.name", "A")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "first")
    (repo / "a.txt").write_text("two\n")  # the change every case tries to hide
    return repo


def _marker(tmp_path: Path) -> str:
    return f"touch {tmp_path}/PWNED"


CASES = {
    # (the attributes are committed first: the agent's own git would run the filter on that commit)
    "clean filter": lambda r, m: (_attributes(r, "* filter=x"), git(r, "config", "filter.x.clean", f"{m}; cat")),
    "smudge filter": lambda r, m: (_attributes(r, "* filter=x"), git(r, "config", "filter.x.smudge", f"{m}; cat")),
    "required filter": lambda r, m: (
        _attributes(r, "* filter=x"), git(r, "config", "filter.x.required", "true"), git(r, "config", "filter.x.clean", m)
    ),
    "textconv": lambda r, m: (_attributes(r, "* diff=x"), git(r, "config", "diff.x.textconv", f"{m}; cat")),
    "fsmonitor": lambda r, m: git(r, "config", "core.fsmonitor", f"{m}; false"),
    "pager": lambda r, m: git(r, "config", "core.pager", f"{m}; cat"),
    "alias": lambda r, m: git(r, "config", "alias.st", f"!{m}"),
    "hooks": lambda r, m: _hook(r, m),
    "includeIf": lambda r, m: _include(r, m),
    "core.worktree": lambda r, m: git(r, "config", "core.worktree", str(r.parent)),
    "assume-unchanged": lambda r, m: git(r, "update-index", "--assume-unchanged", "a.txt"),
    "skip-worktree": lambda r, m: git(r, "update-index", "--skip-worktree", "a.txt"),
    "untracked cache": lambda r, m: git(r, "config", "core.untrackedCache", "true"),
    "info/attributes": lambda r, m: (git(r, "config", "filter.x.clean", f"{m}; cat"), (r / ".git/info/attributes").write_text("* filter=x\n")),
}


def _attributes(repo: Path, line: str) -> None:
    (repo / ".gitattributes").write_text(line + "\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")


def _hook(repo: Path, marker: str) -> None:
    for name in ("post-index-change", "pre-commit", "reference-transaction", "post-checkout"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\n{marker}\n")
        hook.chmod(0o755)


def _include(repo: Path, marker: str) -> None:
    included = repo.parent / "included.cfg"
    included.write_text(f"[core]\n\tfsmonitor = {marker}; false\n\tpager = {marker}; cat\n")
    git(repo, "config", f"includeIf.gitdir:{repo}/.git.path", str(included))
    git(repo, "config", "include.path", str(included))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_planted_setting_runs_nothing_and_hides_nothing(case: str, repo: Path, tmp_path: Path) -> None:
    CASES[case](repo, _marker(tmp_path))
    (repo / "a.txt").write_text("two\n")
    for args in (["status", "--porcelain"], ["diff", "--stat"], ["log", "-p", "-1"], ["st"]):
        run_git(repo, args)
    status = run_git(repo, ["status", "--porcelain", "--untracked-files=no"]).stdout.decode()
    assert not (tmp_path / "PWNED").exists(), case
    assert " M a.txt" in status.splitlines(), (case, status)
    diff = run_git(repo, ["diff", "a.txt"]).stdout.decode()
    assert "-one" in diff and "+two" in diff


def test_history_files_cannot_rewrite_what_git_reports(repo: Path) -> None:
    git(repo, "commit", "-qam", "second")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "commit", "-q", "--allow-empty", "-m", "third")
    (repo / ".git" / "shallow").write_text(head + "\n")  # would cut the history at `second`
    (repo / ".git" / "info" / "grafts").write_text(head + "\n")
    git(repo, "replace", "HEAD", head)  # replace refs: disabled
    count = run_git(repo, ["rev-list", "--count", "HEAD"]).stdout.decode().strip()
    assert count == "3"
    subject = run_git(repo, ["log", "-1", "--format=%s"]).stdout.decode().strip()
    assert subject == "third"


def test_a_nested_submodules_config_is_never_read(repo: Path, tmp_path: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    git(sub, "config", "user.email", "a@example.com")
    git(sub, "config", "user.name", "A")
    (sub / "f").write_text("x\n")
    git(sub, "add", "f")
    git(sub, "commit", "-qm", "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "./sub", "sub")
    git(sub, "config", "core.fsmonitor", f"{_marker(tmp_path)}; false")
    (sub / "f").write_text("changed\n")
    run_git(repo, ["status", "--porcelain"])
    assert not (tmp_path / "PWNED").exists()


def test_a_git_file_or_link_is_not_a_repository(tmp_path: Path, repo: Path) -> None:
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    (pointer / ".git").write_text(f"gitdir: {repo}/.git\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(repo / ".git")
    for folder in (pointer, linked):
        with pytest.raises(NotARepository, match="not a folder"):
            run_git(folder, ["status"])
        cli = subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), "-C", str(folder), "status"], capture_output=True)
        assert cli.returncode == 128 and b"not a folder" in cli.stderr


def test_the_script_finds_the_repository_like_git(repo: Path) -> None:
    (repo / "deep").mkdir()
    cli = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "status", "--porcelain"], cwd=repo / "deep", capture_output=True
    )
    assert cli.returncode == 0 and b" M a.txt" in cli.stdout
    assert git(repo, "status", "--porcelain").startswith(" M a.txt")  # the agent's own repo is unchanged
