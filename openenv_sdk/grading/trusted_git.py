"""git for a grader: read an agent's repository without running or obeying anything it wrote.

A repository's `.git/config` can name programs that git runs on its own (clean and smudge
filters, diff textconv drivers, hooks, fsmonitor, pager, aliases, `core.sshCommand`,
`includeIf` files, `core.worktree`), and its other files change what git reports (`info/grafts`,
`shallow`, replace refs, alternates, assume-unchanged and skip-worktree bits in the index). Run
plainly in the agent's repository, `git status` in a check runs the agent's code with the
check's rights. Here git runs instead against a sanitized copy of the git folder:

- the copy has a config the grader writes (the repository format only), no hooks, no `info/`
  but `info/exclude`, no `shallow`, no grafts, no alternates, no `modules/` or `worktrees/`;
  symlinks, fifos and sockets anywhere in it are dropped; objects are hard links (read only);
  files keep their times (git's racy-entry check compares the index's time with the files');
- the index copy has its assume-unchanged and skip-worktree bits cleared, so every tracked
  file is compared with the work tree;
- git reads no system or global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`),
  no system or in-tree attributes where it can (`GIT_ATTR_NOSYSTEM`, `GIT_ATTR_SOURCE` at the
  empty tree, git 2.40 and later), no replace refs, and is told `core.hooksPath=/dev/null`,
  `core.fsmonitor=false`, `core.untrackedCache=false`, submodules ignored, no protocol allowed;
- a `.git` that is a file (`gitdir:` pointer) or a symlink is not a repository: refused.

With git before 2.40, in-tree `.gitattributes` still apply git's built-in conversions (`text`,
`eol`, `ident`, `working-tree-encoding`): they run no program, but can make line-ending changes
look clean. Filter and diff drivers they name do nothing, as no config defines them.

Writes (`git add`, `commit`) go to the copy, which is removed afterwards: this is for reading.

Standard library only: a check runs it as `python3 -I -S trusted_git.py [-C DIR]... ARGS` in
place of `git` (it finds the repository from the working directory as git does), or a grader
calls `run_git(repo, args)`.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["GIT_SETTINGS", "NotARepository", "find_repository", "main", "run_git", "sanitized_copy", "trusted_env"]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
SKIPPED = frozenset({"config", "config.worktree", "hooks", "modules", "worktrees", "shallow", "commondir", "gitdir"})
"""Top-level entries of a git folder that are never copied."""
GIT_SETTINGS = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.untrackedCache": "false",
    "core.attributesFile": "/dev/null",
    "core.pager": "cat",
    "core.editor": "true",
    "core.sshCommand": "false",
    "core.askPass": "",
    "sequence.editor": "true",
    "credential.helper": "",
    "gpg.program": "false",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "log.showSignature": "false",
    "submodule.recurse": "false",
    "diff.ignoreSubmodules": "all",
    "status.submoduleSummary": "false",
    "protocol.allow": "never",
    "safe.directory": "*",
}
"""Given on the command line's level: above anything a config file could say."""


class NotARepository(ValueError):
    """No git folder that may be read: none found, or a `.git` that is a file or a symlink."""


def find_repository(start: str | Path) -> Path:
    """The work tree holding `start`: the nearest folder upwards with a `.git` folder.

    Raises:
        NotARepository: none, or a `.git` there that is not a plain folder.
    """
    folder = Path(os.path.abspath(start))
    for candidate in (folder, *folder.parents):
        git = candidate / ".git"
        try:
            info = os.lstat(git)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            return candidate
        raise NotARepository(f"{git} is not a folder (a gitdir file or a link): not read")
    raise NotARepository(f"no git repository at or above {folder}")


def _copy_tree(source: Path, target: Path, *, link: bool) -> None:
    """Folders and regular files only (links, fifos, sockets and devices dropped)."""
    target.mkdir(mode=0o700, exist_ok=True)
    for entry in os.scandir(source):
        info = entry.stat(follow_symlinks=False)
        dest = target / entry.name
        if stat.S_ISDIR(info.st_mode):
            _copy_tree(Path(entry.path), dest, link=link)
        elif stat.S_ISREG(info.st_mode):
            if link:
                try:
                    os.link(entry.path, dest, follow_symlinks=False)
                    continue
                except OSError:
                    pass
            shutil.copy2(entry.path, dest, follow_symlinks=False)


def _object_format(config: Path) -> str | None:
    """`extensions.objectFormat` of the agent's config, read as data (no includes followed)."""
    try:
        info = os.lstat(config)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    out = subprocess.run(
        ["git", "config", "--no-includes", "--file", str(config), "--get", "extensions.objectformat"],
        capture_output=True, text=True, timeout=10, env=trusted_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    value = out.stdout.strip().lower()
    return value if value in ("sha1", "sha256") else None


def sanitized_copy(git_dir: Path, target: Path) -> Path:
    """Copy the git folder `git_dir` to `target` as the module's doc says; returns `target`."""
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    for entry in os.scandir(git_dir):
        if entry.name in SKIPPED:
            continue
        info = entry.stat(follow_symlinks=False)
        dest = target / entry.name
        if entry.name == "info":
            exclude = Path(entry.path) / "exclude"
            dest.mkdir(mode=0o700)
            if stat.S_ISDIR(info.st_mode) and exclude.is_file() and not exclude.is_symlink():
                shutil.copy2(exclude, dest / "exclude", follow_symlinks=False)
        elif entry.name == "objects" and stat.S_ISDIR(info.st_mode):
            _copy_tree(Path(entry.path), dest, link=True)
            for name in ("alternates", "http-alternates"):
                (dest / "info" / name).unlink(missing_ok=True)
        elif stat.S_ISDIR(info.st_mode):
            _copy_tree(Path(entry.path), dest, link=False)
        elif stat.S_ISREG(info.st_mode):
            shutil.copy2(entry.path, dest, follow_symlinks=False)
    object_format = _object_format(git_dir / "config")
    config = "[core]\n\trepositoryformatversion = {}\n\tbare = false\n\tlogallrefupdates = false\n"
    if object_format == "sha256":
        config = config.format(1) + "[extensions]\n\tobjectformat = sha256\n"
    else:
        config = config.format(0)
    (target / "config").write_text(config, encoding="utf-8")
    return target


def trusted_env(git_dir: Path | None = None, work_tree: Path | None = None, home: Path | None = None) -> dict[str, str]:
    """git's whole environment: nothing of the caller's, no config but `GIT_SETTINGS`."""
    env = {
        "PATH": SYSTEM_PATH,
        "LANG": "C.UTF-8",
        "HOME": str(home or "/nonexistent"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_ATTR_SOURCE": EMPTY_TREE,
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_CONFIG_COUNT": str(len(GIT_SETTINGS)),
    }
    for i, (key, value) in enumerate(GIT_SETTINGS.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    return env


def _clear_index_bits(env: dict[str, str], top: Path) -> None:
    """Assume-unchanged (lowercase tags) and skip-worktree (`S`) entries compared again."""
    listed = subprocess.run(
        ["git", "ls-files", "-v", "-z"], capture_output=True, env=env, cwd=top, timeout=60, stdin=subprocess.DEVNULL
    )
    paths = [
        entry[2:]
        for entry in listed.stdout.split(b"\0")
        if len(entry) > 2 and (entry[:1].islower() or entry[:1] == b"S")
    ]
    for flag in ("--no-assume-unchanged", "--no-skip-worktree"):
        for start in range(0, len(paths), 500):  # on the command line: `--stdin` ignores these flags
            names = [os.fsdecode(p) for p in paths[start : start + 500]]
            subprocess.run(
                ["git", "update-index", flag, "--", *names], capture_output=True, env=env, cwd=top, timeout=60,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip


def run_git(
    repo: str | Path,
    args: Sequence[str],
    *,
    cwd: str | Path | None = None,
    timeout_s: float = 60.0,
    scratch: str | Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` on the work tree `repo` through a sanitized copy of its `.git` folder.

    Args:
        repo: the work tree (the folder holding `.git`).
        args: git's arguments, after `git`.
        cwd: where git runs (inside the work tree; default `repo`).
        timeout_s: git's wall-clock limit.
        scratch: where the copy is made (default: the temp dir); it is removed afterwards.

    Raises:
        NotARepository: `repo/.git` is missing, a file or a link.
        subprocess.TimeoutExpired: git ran out of time.
    """
    repo = Path(os.path.abspath(repo))
    git = repo / ".git"
    try:
        info = os.lstat(git)
    except FileNotFoundError:
        raise NotARepository(f"{repo} holds no .git folder") from None
    if not stat.S_ISDIR(info.st_mode):
        raise NotARepository(f"{git} is not a folder (a gitdir file or a link): not read")
    with tempfile.TemporaryDirectory(prefix="trusted-git-", dir=scratch) as temp:
        copy = sanitized_copy(git, Path(temp) / "git")
        home = Path(temp) / "home"
        home.mkdir()
        env = trusted_env(copy, repo, home)
        where = Path(cwd) if cwd is not None else repo
        _clear_index_bits(env, repo)
        return subprocess.run(
            ["git", "--no-pager", *args], capture_output=True, env=env, cwd=where, timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """`git [-C DIR]... ARGS` with the repository found from the working directory; git's output
    and exit code pass through (128 with the reason when there is no readable repository)."""
    args = list(sys.argv[1:] if argv is None else argv)
    where = Path.cwd()
    while len(args) >= 2 and args[0] == "-C":
        where = where / args[1]
        args = args[2:]
    if args[:1] == ["--no-pager"]:
        args = args[1:]
    try:
        result = run_git(find_repository(where), args, cwd=where, scratch=os.environ.get("TMPDIR") or None)
    except NotARepository as e:
        sys.stderr.write(f"fatal: {e}\n")
        return 128
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.stderr.write(f"fatal: trusted git: {e}\n")
        return 128
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
