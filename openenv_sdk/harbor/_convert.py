"""Import a Harbor task folder into the terminal environment's task format.

    Harbor task                    terminal environment
    instruction.md            ->   tasks/<id>/task.yaml  prompt (title, category, difficulty from task.toml)
    environment/Dockerfile    ->   tasks/<id>/task.yaml  workdir; tasks/<id>/files/; tasks/<id>/setup.sh
    tests/                    ->   hidden/<id>/tests/ and hidden/<id>/check.sh (runs tests/test.sh)
    solution/solve.sh         ->   hidden/<id>/solution.sh (replayed through the agent's bash tool)
    (nothing)                 ->   hidden/<id>/null.sh (the null attempt: no command at all)

`tasks/` goes into the image and the agent's view; `hidden/` never does: the grader sends the
check and the tests at grading time, to a fresh sandbox the agent never saw. What cannot be
mapped is refused with every reason at once (`HarborImportError`); what is mapped with a change
is listed in the report's `notes`.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from pydantic import BaseModel, Field

from ..terminal_task import CATEGORIES, DIFFICULTIES, TASK_ID_PATTERN, TerminalTaskSpec, task_yaml
from ._dockerfile import BASE_PACKAGES, WorkspacePlan, plan_workspace
from ._errors import HarborImportError
from ._image import plan_image
from ._limits import one_line
from ._task import HarborTask, read_harbor_task
from ._verifier import VerifierPlan, plan_verifier

__all__ = ["HarborImportError", "ImportReport", "import_harbor_task"]

_CATEGORY_WORDS = (
    ("git", ("git", "version-control")),
    ("permissions", ("permission", "security", "chmod")),
    ("archives", ("archive", "compression", "tar")),
    ("config", ("config", "system-administration", "sysadmin", "devops", "networking")),
    ("files", ("file", "filesystem")),
    ("text", ("text", "data-processing", "data", "log", "parsing", "csv", "json")),
)
"""The terminal environment's categories, by words of Harbor's `category` and `tags` (first match
wins; anything else is `scripting`)."""


class ImportReport(BaseModel):
    """What one import wrote, and what it changed on the way."""

    task_id: str
    source: str = Field(description="The Harbor task folder.")
    task_folder: str = Field(description="`tasks/<id>`: what the agent's side holds.")
    hidden_folder: str = Field(description="`hidden/<id>`: the check, the tests and the solutions (host only).")
    workdir: str
    category: str
    difficulty: str
    notes: list[str] = Field(default_factory=list, description="What was dropped or changed, and why.")


def import_harbor_task(
    task_dir: str | Path,
    *,
    tasks_dir: str | Path,
    hidden_dir: str | Path | None = None,
    task_id: str | None = None,
    prefix: str = "",
    category: str | None = None,
    ignore_packages: tuple[str, ...] | list[str] = (),
    overwrite: bool = False,
    own_image: bool = False,
) -> ImportReport:
    """Convert one Harbor task folder into the terminal environment's format.

    Args:
        task_dir: the Harbor task (`task.toml`, `instruction.md`, `environment/`, `tests/`, `solution/`).
        tasks_dir: the environment's `tasks/` (e.g. `environments/terminal/tasks`).
        hidden_dir: where checks and solutions go; default `hidden/` beside `tasks_dir`.
        task_id: the new task's id; default the folder's name (lowercase, `_` for other characters).
        prefix: put before the default id (e.g. `tb2_`).
        category: one of the terminal categories; default guessed from `[metadata]`.
        ignore_packages: packages the Dockerfile installs that the task does not need in the
            sandbox (e.g. `curl` installed only for the tests' own installer).
        overwrite: replace a task of the same id.
        own_image: keep the task's Dockerfile (and compose file) as its own image, built on the
            environment's server image by `build_task_image` (`openenv harbor build`), instead
            of mapping it onto the environment's shared system (`_image.py`).

    Raises:
        HarborImportError: the task cannot be mapped; every reason is listed.
        HarborNameError, HarborSizeError: its name or a size breaks a limit (docs/harbor.md).
        HarborComposeError: (`own_image`) its compose file uses keys outside the supported subset.
        FileNotFoundError: `task_dir` is not a folder.
    """
    task = read_harbor_task(task_dir)
    tasks_dir, source = Path(tasks_dir), Path(task_dir)
    hidden_root = Path(hidden_dir) if hidden_dir is not None else tasks_dir.parent / "hidden"
    new_id = task_id or prefix + re.sub(r"[^a-z0-9]+", "_", source.resolve().name.lower()).strip("_")
    problems = list(task.problems)
    notes: list[str] = []
    if not re.fullmatch(TASK_ID_PATTERN, new_id):
        problems.append(f"task id {new_id!r}: use lowercase letters, digits and _")
    if not overwrite and ((tasks_dir / new_id).exists() or (hidden_root / new_id).exists()):
        problems.append(f"{tasks_dir / new_id} exists: pass overwrite=True (--force) to replace it")

    workdir = task.environment.get("workdir")
    workdir = workdir if isinstance(workdir, str) else None
    if own_image:
        image = plan_image(task.environment_dir, source=source, workdir=workdir)
        problems += image.problems
        notes += [*image.notes, "built as its own image on the environment's server image (its FROM replaced)"]
        workspace = WorkspacePlan(workdir=None if image.problems else image.workdir)
    else:
        workspace = plan_workspace(task.environment_dir, workdir=workdir)
        problems += workspace.problems
        notes += workspace.notes
        problems += _package_problems(workspace, tasks_dir.parent, set(ignore_packages))
    problems += _config_problems(task, notes)
    verifier = plan_verifier(task, workspace.workdir or "/app") if workspace.workdir else VerifierPlan()
    problems += [p for p in verifier.problems if p not in problems]
    notes += verifier.notes
    solve = task.solution_dir / "solve.sh"
    if not solve.is_file():
        problems.append("solution/solve.sh is missing: the terminal environment keeps a reference solution per task")
    else:
        others = [p.relative_to(task.solution_dir).as_posix() for p in task.solution_dir.rglob("*") if p.is_file() and p != solve]
        if others:
            problems.append(
                f"solution/{others[0]}: only solve.sh is replayed (through the agent's bash tool), without other files"
            )
    chosen_category = category or _category(task)
    if chosen_category not in CATEGORIES:
        problems.append(f"category {chosen_category!r}: use one of the terminal environment's categories")
    if problems:
        raise HarborImportError(source, problems)

    assert workspace.workdir is not None
    difficulty = str(task.metadata.get("difficulty", "")).lower()
    if difficulty not in DIFFICULTIES:
        notes.append(f"[metadata] difficulty {difficulty or '(none)'!r} read as 'medium'")
        difficulty = "medium"
    task_folder, hidden_folder = tasks_dir / new_id, hidden_root / new_id
    for folder in (task_folder, hidden_folder):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    _write_task(task, workspace, task_folder, chosen_category, difficulty, own_image=own_image)
    _write_hidden(task, workspace.workdir, verifier, hidden_folder, solve.read_text(encoding="utf-8"))
    return ImportReport(
        task_id=new_id,
        source=str(source),
        task_folder=str(task_folder),
        hidden_folder=str(hidden_folder),
        workdir=workspace.workdir,
        category=chosen_category,
        difficulty=difficulty,
        notes=notes,
    )


def _package_problems(workspace: WorkspacePlan, env_dir: Path, ignored: set[str]) -> list[str]:
    """Packages the sandbox cannot have; the manifest's `sandbox.system_packages` count as installed."""
    installed = set(BASE_PACKAGES)
    manifest = env_dir / "openenv.yaml"
    if manifest.is_file():
        from openenv_sdk.manifest import load_manifest

        sandbox = load_manifest(manifest).sandbox
        installed |= set(sandbox.system_packages if sandbox else [])
    problems = []
    missing = [p for p in workspace.apt_packages if p not in installed | ignored]
    if missing:
        problems.append(
            f"Dockerfile installs {', '.join(missing)}, which the environment does not have: add them to "
            f"sandbox.system_packages in {manifest} (its image installs them), or --ignore-package NAME for "
            f"one the task does not need"
        )
    pip = [p for p in workspace.pip_packages if p not in ignored]
    if pip:
        problems.append(
            f"Dockerfile pip-installs {', '.join(pip)}: the agent's python3 has no per-task packages and the "
            f"sandbox no network (--ignore-package NAME for one only the tests use)"
        )
    return problems


def _config_problems(task: HarborTask, notes: list[str]) -> list[str]:
    env = task.environment
    problems = []
    if env.get("docker_image") and (task.environment_dir / "Dockerfile").is_file():
        notes.append(f"[environment] docker_image {env['docker_image']!r} ignored: read from environment/Dockerfile")
    elif env.get("docker_image"):
        problems.append(
            f"task.toml [environment] docker_image {env['docker_image']!r}: a prebuilt image's contents are "
            f"unknown to the importer (it needs environment/Dockerfile)"
        )
    if (env.get("gpus") or 0) > 0:
        problems.append("task.toml [environment] gpus: the terminal sandbox has no GPU")
    if env.get("allow_internet") is True:
        notes.append("[environment] allow_internet ignored: the sandbox has no network")
    limits = [k for k in ("cpus", "memory_mb", "storage_mb") if k in env]
    if limits:
        notes.append(f"[environment] {', '.join(limits)} ignored: the manifest's sandbox limits apply to every task")
    if "timeout_sec" in task.agent:
        notes.append("[agent] timeout_sec ignored: the orchestrator bounds the episode (30 s per command)")
    return problems


def _category(task: HarborTask) -> str:
    words = [str(task.metadata.get("category", "")).lower()]
    tags = task.metadata.get("tags") or task.metadata.get("keywords") or []
    words += [str(t).lower() for t in tags] if isinstance(tags, list) else []
    for category, keys in _CATEGORY_WORDS:
        if any(key in word for word in words for key in keys):
            return category
    return "scripting"


def _title(instruction: str) -> str:
    first = next((line.strip().lstrip("#").strip() for line in instruction.splitlines() if line.strip()), "")
    first = re.sub(r"[`*_]", "", first)
    if len(first) <= 60:
        return first.rstrip(".")
    return first[:60].rsplit(" ", 1)[0].rstrip(",.;:") + "..."


def _write_task(
    task: HarborTask, workspace: WorkspacePlan, folder: Path, category: str, difficulty: str, *, own_image: bool
) -> None:
    spec = TerminalTaskSpec(
        title=_title(task.instruction),
        category=category,  # type: ignore[arg-type]  # checked against CATEGORIES by the caller
        difficulty=difficulty,  # type: ignore[arg-type]  # one of DIFFICULTIES by the caller
        workdir=workspace.workdir,
        harbor=True,
        image=own_image,
        prompt=task.instruction + "\n",
    )
    header = f"# Imported from the Harbor task {one_line(task.name)} by `openenv harbor import`: re-import it rather than edit.\n"
    (folder / "task.yaml").write_text(task_yaml(spec, header=header), encoding="utf-8")
    if own_image:  # the build context, built by `build_task_image`; what the agent's image holds anyway
        shutil.copytree(task.environment_dir, folder / "environment", symlinks=True)
    files = folder / "files"
    for copy in workspace.copies:
        target = files / copy.target
        if copy.source.is_dir():
            shutil.copytree(copy.source, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(copy.source, target)
    if workspace.setup:
        lines = [
            "# Generated from the Harbor task's environment/Dockerfile: its RUN lines, run as the agent in the",
            "# sandbox before the episode (package installs dropped: the environment has them).",
            f"cd {shlex.quote(workspace.workdir or '/')}",
            *workspace.setup,
        ]
        (folder / "setup.sh").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_hidden(task: HarborTask, workdir: str, verifier: VerifierPlan, folder: Path, solve: str) -> None:
    (folder / "check.sh").write_text(verifier.check_script, encoding="utf-8")
    for name, text in verifier.tests.items():
        path = folder / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    # Harbor's oracle runs `bash solve.sh` in the WORKDIR; so does the replay, through the agent's tool.
    (folder / "solution.sh").write_text(
        f"# The Harbor task's solution/solve.sh, run as Harbor's oracle runs it.\n"
        f"cd {shlex.quote(workdir)} && bash -c {shlex.quote(solve)} solve.sh\n",
        encoding="utf-8",
    )
    (folder / "null.sh").write_text("", encoding="utf-8")
