"""A Harbor task's `environment/Dockerfile`, read as a plan for a sandbox workspace.

The terminal environment has no per-task image: every episode is a sandbox on the server's own
system (read-only), with one writable workspace. So a Dockerfile maps only when it builds the
task's starting files:

- `WORKDIR` (the last one) becomes the workspace, mounted at that path in the sandbox;
- `COPY`/`ADD` of local files into the workspace become the task's `files/`;
- `RUN` lines become the task's `setup.sh` (run in the sandbox, as the agent, before the episode),
  except package installs: Debian packages the environment already has are dropped, the others
  are refused with the fix (add them to `sandbox.system_packages`), as are pip installs;
- `FROM` is not used (noted); `USER`, `EXPOSE`, `CMD`, `ENTRYPOINT`, `LABEL`, `HEALTHCHECK`
  and harmless `ENV`s are ignored (noted).

Anything else (multi-stage builds, `ADD` of a URL or an archive, files put outside the
workspace, `ENV` the commands would need, `ARG`, `VOLUME`, `SHELL`, heredocs) is a problem:
the importer refuses the task and says which line and why.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BASE_PACKAGES", "Copy", "WorkspacePlan", "plan_workspace"]

BASE_PACKAGES = frozenset({
    "bash", "coreutils", "dash", "debianutils", "diffutils", "findutils", "grep", "gzip", "hostname",
    "mawk", "ncurses-bin", "perl-base", "sed", "tar", "util-linux", "bubblewrap", "login", "passwd",
    "python3", "python3-minimal", "ca-certificates", "tzdata", "base-files", "libc-bin",
})  # fmt: skip
"""Debian packages every terminal image has (the `python:3.11-slim` base and the sandbox's own)."""

HARMLESS_ENV = frozenset({
    "DEBIAN_FRONTEND", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK", "LANG", "LC_ALL", "TZ", "TERM",
})  # fmt: skip
"""`ENV` names that change nothing the task's files depend on (dropped with a note)."""

IGNORED = frozenset({"USER", "EXPOSE", "CMD", "ENTRYPOINT", "LABEL", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"})
FORBIDDEN_WORKDIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/dev",
                      "/sys", "/tmp", "/run", "/var")  # fmt: skip
"""Where a workspace cannot be mounted: the sandbox's system, its own `/tmp`, the sessions' folders."""

_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")
_WORKDIR = re.compile(r"^/[A-Za-z0-9._/-]*$")
"""What the terminal environment's `workdir` takes (a path it mounts the workspace on)."""
_APT_LISTS = ("/var/lib/apt/lists/*", "/var/lib/apt/lists", "/var/cache/apt/*", "/var/cache/apt/archives/*")
_ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2|tar\.xz|txz|tar\.zst)$")


class Copy(BaseModel):
    """One file or folder the Dockerfile copies into the workspace."""

    model_config = ConfigDict(frozen=True)

    source: Path = Field(description="In the task's `environment/` folder.")
    target: str = Field(description="Relative to the workspace; `.` for its root.")


class WorkspacePlan(BaseModel):
    """What the Dockerfile means for the sandbox, or why it cannot be had."""

    workdir: str | None = Field(default=None, description="The last WORKDIR: where the workspace is mounted.")
    base_image: str | None = None
    copies: list[Copy] = Field(default_factory=list)
    setup: list[str] = Field(default_factory=list, description="Shell lines of setup.sh, in order.")
    apt_packages: list[str] = Field(default_factory=list)
    pip_packages: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="What was dropped or changed, for the report.")
    problems: list[str] = Field(default_factory=list, description="Why it cannot be imported (empty: it can).")


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, KEYWORD, arguments) per instruction: continuations joined, comments dropped."""
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # Docker drops comment lines inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(part.strip() for part in pending).strip()
        pending = []
        keyword, _, rest = joined.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    if pending:
        joined = " ".join(pending).strip()
        keyword, _, rest = joined.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    return out


def _split_commands(text: str) -> list[str]:
    """A shell line split at top-level `&&` and `;` (quotes, escapes and `$(...)` respected)."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif char == quote:
                quote = None
        elif char == "\\" and i + 1 < len(text):
            current += [char, text[i + 1]]
            i += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "(":
            depth += 1
            current.append(char)
        elif char == ")":
            depth = max(0, depth - 1)
            current.append(char)
        elif depth == 0 and (text.startswith("&&", i) or char == ";"):
            parts.append("".join(current).strip())
            current = []
            i += 1 if char == "&" else 0
        else:
            current.append(char)
        i += 1
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _package_command(segment: str) -> tuple[str, list[str]] | None:
    """`("apt"|"pip"|"noop", packages)` when the command only manages packages; else None."""
    try:
        words = shlex.split(segment)
    except ValueError:
        return None
    while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] == "sudo"):
        words = words[1:]
    if not words:
        return None
    command, args = words[0], words[1:]
    if command in ("apt-get", "apt"):
        verbs = [a for a in args if not a.startswith("-")]
        if verbs and verbs[0] in ("update", "clean", "autoclean", "autoremove"):
            return "noop", []
        if verbs and verbs[0] == "install":
            return "apt", [a.split("=")[0].split(":")[0] for a in verbs[1:]]
        return None
    if command == "rm" and args and all(a.startswith("-") or a in _APT_LISTS for a in args):
        return "noop", []
    command = posixpath.basename(command)  # `/opt/venv/bin/pip install ...` is pip too
    if command in ("python", "python3") and args[:2] == ["-m", "pip"]:
        command, args = "pip", args[2:]
    if command == "uv" and args[:1] == ["pip"]:
        command, args = "pip", args[1:]
    if command in ("pip", "pip3") and args[:1] == ["install"]:
        names = [a for a in args[1:] if not a.startswith("-")]
        return "pip", [re.split(r"[<>=!~\[;]", n)[0] for n in names]
    return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def plan_workspace(environment_dir: Path, *, workdir: str | None = None) -> WorkspacePlan:
    """Read `environment/Dockerfile` (every problem collected, none raised).

    Args:
        environment_dir: the task's `environment/` folder.
        workdir: `task.toml`'s `[environment] workdir`, which Harbor runs the agent in; default the
            Dockerfile's last WORKDIR.
    """
    plan = WorkspacePlan()
    if (environment_dir / "docker-compose.yaml").is_file() or (environment_dir / "docker-compose.yml").is_file():
        plan.problems.append(
            "environment/docker-compose.yaml: a multi-container environment (services beside the agent's "
            "container) cannot be mapped: the terminal environment is one sandbox with no network"
        )
    dockerfile = environment_dir / "Dockerfile"
    if not dockerfile.is_file():
        plan.problems.append("environment/Dockerfile is missing: the task's starting state is unknown")
        return plan
    steps = _instructions(dockerfile.read_text(encoding="utf-8", errors="replace"))
    # Every WORKDIR is resolved first: copies and RUNs are placed relative to the last one.
    cwd, workdirs = "/", []
    for _, keyword, args in steps:
        if keyword == "WORKDIR":
            cwd = posixpath.normpath(posixpath.join(cwd, args.strip().strip('"')))
            workdirs.append(cwd)
    if not workdirs and workdir is None:
        plan.problems.append("Dockerfile: no WORKDIR, so there is no workspace folder to give the agent (add WORKDIR /app)")
        return plan
    workdir = plan.workdir = posixpath.normpath(workdir) if workdir is not None else workdirs[-1]
    if not _WORKDIR.match(workdir):
        plan.problems.append(f"WORKDIR {workdir!r}: use letters, digits, '.', '_', '-' and '/' only")
        return plan
    if workdir == "/" or any(_inside(workdir, banned) for banned in FORBIDDEN_WORKDIRS):
        plan.problems.append(
            f"WORKDIR {workdir} cannot be the workspace (it is the sandbox's system or its /tmp); "
            f"use a folder of its own such as /app"
        )
        return plan
    cwd = "/"
    made: list[str] = []
    seen_run = False
    for line, keyword, args in steps:
        where = f"Dockerfile line {line}"
        if keyword == "FROM":
            if plan.base_image is not None:
                plan.problems.append(f"{where}: a second FROM (a multi-stage build) cannot be mapped")
            plan.base_image = args.split()[0] if args else ""
        elif keyword == "WORKDIR":
            cwd = posixpath.normpath(posixpath.join(cwd, args.strip().strip('"')))
            if not _inside(cwd, workdir) and not _inside(workdir, cwd):
                plan.problems.append(f"{where}: WORKDIR {cwd} is outside the workspace {workdir}")
            elif _inside(cwd, workdir) and cwd != workdir and cwd not in made:
                made.append(cwd)
                plan.setup.append(f"mkdir -p {shlex.quote(cwd)}")
        elif keyword in ("COPY", "ADD"):
            _copy(plan, where, keyword, args, cwd, workdir, environment_dir)
            if seen_run:  # Docker would copy after the earlier RUN lines; here setup.sh runs last
                plan.notes.append(f"{where}: {keyword} after a RUN: every file is in place before setup.sh runs")
        elif keyword == "RUN":
            before = len(plan.setup)
            _run(plan, where, args, cwd)
            seen_run = seen_run or len(plan.setup) > before
        elif keyword == "ENV":
            names = _env_names(args)
            needed = [n for n in names if n not in HARMLESS_ENV]
            if needed:
                plan.problems.append(
                    f"{where}: ENV {', '.join(needed)} cannot be mapped: the agent's shell has no per-task variables"
                )
            else:
                plan.notes.append(f"{where}: ENV {', '.join(names)} dropped (changes nothing the task needs)")
        elif keyword in IGNORED:
            plan.notes.append(f"{where}: {keyword} ignored (the sandbox runs commands as its own user, no service)")
        else:
            plan.problems.append(f"{where}: {keyword} cannot be mapped to a sandbox workspace")
    if plan.base_image:
        plan.notes.append(
            f"FROM {plan.base_image} is not used: the task runs on the terminal environment's own system "
            f"(Debian with bash, coreutils, git and python3)"
        )
    return plan


def _env_names(args: str) -> list[str]:
    try:
        words = shlex.split(args)
    except ValueError:
        return [args]
    if words and "=" not in words[0]:
        return [words[0]]  # the legacy form `ENV NAME value`
    return [w.split("=", 1)[0] for w in words]


def _copy(plan: WorkspacePlan, where: str, keyword: str, args: str, cwd: str, workdir: str, context: Path) -> None:
    try:
        words = json.loads(args) if args.startswith("[") else shlex.split(args)
    except ValueError:
        plan.problems.append(f"{where}: {keyword} {args} cannot be read")
        return
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        plan.problems.append(f"{where}: {keyword} --from (a multi-stage build) cannot be mapped")
        return
    if any(f.startswith(("--chown", "--chmod")) for f in flags):
        plan.notes.append(f"{where}: {keyword} {' '.join(flags)} ignored: the workspace belongs to the agent")
    if len(paths) < 2 or "<<" in args:
        plan.problems.append(f"{where}: {keyword} {args} cannot be read (a heredoc, or no source)")
        return
    *sources, dest = paths
    target = posixpath.normpath(posixpath.join(cwd, dest))
    if not _inside(target, workdir):
        plan.problems.append(
            f"{where}: {keyword} puts files at {target}, outside the workspace {workdir}: the agent's sandbox "
            f"can only hold files in its workspace"
        )
        return
    root = context.resolve()
    matched: list[Path] = []
    for source in sources:
        if keyword == "ADD" and re.match(r"^(https?|git)://|^git@", source):
            plan.problems.append(f"{where}: ADD {source} downloads at build time; the importer does not fetch")
            return
        found = sorted(root.glob(source)) if any(c in source for c in "*?[") else [root / source]
        for path in found:
            resolved = path.resolve()
            if not resolved.is_relative_to(root) or not path.exists():
                plan.problems.append(f"{where}: {keyword} {source}: no such file in environment/")
                return
            if keyword == "ADD" and path.is_file() and _ARCHIVE.search(path.name):
                plan.problems.append(f"{where}: ADD {source} unpacks an archive; unpack it into environment/ and COPY")
                return
            matched.append(path)
    relative = posixpath.relpath(target, workdir)
    into_folder = dest.endswith("/") or len(matched) > 1 or any(p.is_dir() for p in matched)
    for path in matched:
        if path.is_dir():
            plan.copies.append(Copy(source=path, target=relative))
        else:
            name = posixpath.join(relative, path.name) if into_folder else relative
            plan.copies.append(Copy(source=path, target=posixpath.normpath(name)))


def _run(plan: WorkspacePlan, where: str, args: str, cwd: str) -> None:
    if args.startswith("["):
        try:
            args = shlex.join(json.loads(args))
        except (ValueError, TypeError):
            plan.problems.append(f"{where}: RUN {args} is not a JSON list")
            return
    if "<<" in args:
        plan.problems.append(f"{where}: RUN with a heredoc cannot be mapped; put the file in environment/ and COPY it")
        return
    kept: list[str] = []
    for segment in _split_commands(args):
        found = _package_command(segment)
        if found is None:
            kept.append(segment)
            continue
        kind, packages = found
        bad = [p for p in packages if not _PACKAGE.match(p)]
        if bad and kind == "pip":  # `-r requirements.txt`, a path, a URL
            plan.problems.append(
                f"{where}: {segment!r}: pip installs cannot be mapped (the agent's python3 has no per-task "
                f"packages and the sandbox no network)"
            )
            return
        if bad:
            plan.problems.append(f"{where}: cannot read the package list of {segment!r}")
            return
        if kind == "apt":
            plan.apt_packages += [p for p in packages if p not in plan.apt_packages]
        elif kind == "pip":
            plan.pip_packages += [p for p in packages if p not in plan.pip_packages]
    if kept:
        command = " && ".join(kept)
        # `sh -c` as Docker runs RUN: one shell per line, its exit code decides, in its WORKDIR
        line = f"/bin/sh -c {shlex.quote(command)}"
        plan.setup.append(line if cwd == plan.workdir else f"(cd {shlex.quote(cwd)} && {line})")
