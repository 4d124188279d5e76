"""`openenv harbor import`: Harbor task folders into the terminal environment's format.

The three Harbor tasks written here (`examples/harbor/`) are imported into the terminal
environment; these tests check that the shipped conversion is exactly what the importer writes,
that each task plays through the real terminal server (reference solution 1.0, nothing 0.0, the
tests out of the agent's sight), and that what cannot be mapped is refused with its reason.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.harbor import HarborImportError, import_harbor_task, read_harbor_task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "harbor"
TERMINAL = ROOT / "environments" / "terminal"
SHIPPED = {"fix-fibonacci": "fix_fibonacci", "merge-feature-branch": "merge_feature_branch",
           "status-code-summary": "status_code_summary"}  # fmt: skip

sys.path.insert(0, str(TERMINAL / "tests"))


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    """An empty environment folder with the terminal environment's manifest (its packages)."""
    folder = tmp_path / "env"
    (folder / "tasks").mkdir(parents=True)
    shutil.copy(TERMINAL / "openenv.yaml", folder / "openenv.yaml")
    return folder


def make_task(
    root: Path,
    *,
    dockerfile: str = "FROM ubuntu:24.04\nWORKDIR /app\n",
    test_sh: str = "echo 1 > /logs/verifier/reward.txt\n",
    toml: str = "version = '1.0'\n[metadata]\ndifficulty = 'easy'\ncategory = 'programming'\n",
    extra: dict[str, str] | None = None,
) -> Path:
    """A Harbor task folder with the given parts (`extra`: more files by relative path)."""
    folder = root / "task"
    files = {
        "instruction.md": "Do the thing.\n",
        "task.toml": toml,
        "environment/Dockerfile": dockerfile,
        "tests/test.sh": test_sh,
        "solution/solve.sh": "true\n",
        **(extra or {}),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def refusal(task: Path, env_dir: Path, **kwargs: object) -> list[str]:
    with pytest.raises(HarborImportError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks", **kwargs)  # type: ignore[arg-type]
    assert not any((env_dir / "tasks").iterdir()), "a refused task wrote nothing"
    return caught.value.problems


# --- the shipped tasks --------------------------------------------------------------------------


def test_the_shipped_tasks_are_exactly_the_import_of_the_examples(env_dir: Path) -> None:
    for name, task_id in SHIPPED.items():
        report = import_harbor_task(EXAMPLES / name, tasks_dir=env_dir / "tasks", ignore_packages=["curl"])
        assert report.task_id == task_id and report.workdir == "/app"
        assert tree(env_dir / "tasks" / task_id) == tree(TERMINAL / "tasks" / task_id), f"re-import {name}"
        assert tree(env_dir / "hidden" / task_id) == tree(TERMINAL / "hidden" / task_id), f"re-import {name}"


def test_what_the_import_writes_for_a_terminal_bench_2_task(env_dir: Path) -> None:
    report = import_harbor_task(EXAMPLES / "fix-fibonacci", tasks_dir=env_dir / "tasks", ignore_packages=["curl"])
    task = yaml.safe_load((env_dir / "tasks/fix_fibonacci/task.yaml").read_text())
    assert task == {
        "title": "Fix the Fibonacci script",
        "category": "scripting",
        "difficulty": "medium",
        "workdir": "/app",
        "harbor": True,
        "prompt": (EXAMPLES / "fix-fibonacci/instruction.md").read_text(),
    }
    assert sorted(tree(env_dir / "tasks/fix_fibonacci")) == ["files/fib.py", "task.yaml"]
    assert sorted(tree(env_dir / "hidden/fix_fibonacci")) == [
        "check.sh", "null.sh", "solution.sh", "tests/test.sh", "tests/test_outputs.py"
    ]  # fmt: skip
    test_sh = (env_dir / "hidden/fix_fibonacci/tests/test.sh").read_text().splitlines()
    original = (EXAMPLES / "fix-fibonacci/tests/test.sh").read_text().splitlines()
    assert '"${PYTHON:-python3}" -m pytest -p no:cacheprovider /tests/test_outputs.py -rA' in test_sh
    assert [line for line in test_sh if line.startswith("# (offline")] == [
        "# (offline: dropped by openenv harbor import) apt-get update",
        "# (offline: dropped by openenv harbor import) apt-get install -y curl",
        "# (offline: dropped by openenv harbor import) curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh",
        "# (offline: dropped by openenv harbor import) source $HOME/.local/bin/env",
    ]
    assert test_sh[-5:] == original[-5:]  # how it writes the reward: kept
    assert "bash /tests/test.sh" in (env_dir / "hidden/fix_fibonacci/check.sh").read_text()
    assert any("rewritten to run pytest offline" in note for note in report.notes)
    assert any(note.startswith("FROM python:3.13-slim-bookworm is not used") for note in report.notes)


def test_run_lines_become_setup_and_package_installs_are_dropped(env_dir: Path) -> None:
    import_harbor_task(EXAMPLES / "merge-feature-branch", tasks_dir=env_dir / "tasks")
    setup = (env_dir / "tasks/merge_feature_branch/setup.sh").read_text().splitlines()
    assert setup[2] == "cd /app"
    assert setup[3].startswith("/bin/sh -c 'git init -q -b main repo && cd repo && git config")
    assert "apt-get" not in "\n".join(setup)


def test_the_workspace_is_the_last_workdir_and_files_outside_it_are_refused(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, dockerfile="FROM debian\nWORKDIR /app\nCOPY conf /etc/nginx/conf\n",
                     extra={"environment/conf": "x"})  # fmt: skip
    assert refusal(task, env_dir) == [
        "Dockerfile line 3: COPY puts files at /etc/nginx/conf, outside the workspace /app: the agent's sandbox "
        "can only hold files in its workspace"
    ]


def test_copies_into_the_workspace_land_in_files(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(
        tmp_path,
        dockerfile="FROM debian\nWORKDIR /app\nCOPY data /app/data\nCOPY a.txt b.txt ./in/\nCOPY a.txt renamed.txt\n",
        extra={"environment/data/x/1.csv": "1\n", "environment/a.txt": "a", "environment/b.txt": "b"},
    )
    import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert tree(env_dir / "tasks/task/files") == {
        "data/x/1.csv": b"1\n", "in/a.txt": b"a", "in/b.txt": b"b", "renamed.txt": b"a"
    }  # fmt: skip


# --- through the real terminal server ----------------------------------------------------------


def test_the_imported_tasks_play_through_the_terminal_server() -> None:
    """Reference solution 1.0, doing nothing 0.0, and the agent never sees the tests."""
    from terminal_testkit import client_of, play

    from openenv_sdk.client import GenericEnvClient

    secret = "def reference(n):"  # in fix_fibonacci's hidden tests/test_outputs.py only
    assert secret in (TERMINAL / "hidden/fix_fibonacci/tests/test_outputs.py").read_text()
    with GenericEnvClient(env_dir=TERMINAL) as owner:
        client = client_of(owner)
        try:
            for task_id in SHIPPED.values():
                solved = play(client, task_id, "solution")
                assert (solved.score, solved.tool_errors) == (1.0, []), solved.evidence
                assert solved.evidence["passed"][0].startswith("Harbor reward 1")
                idle = play(client, task_id, "null")
                assert idle.score == 0.0 and idle.evidence["failed"][0].startswith("Harbor reward 0"), idle.evidence

            observation = client.reset(task_id="fix_fibonacci").observation
            assert observation["workdir"] == "/app"

            def bash(command: str) -> str:
                return client.call_tool("bash", command=command).content[0].text

            assert bash("pwd; ls").splitlines()[:2] == ["/app", "fib.py"]
            assert "No such file or directory" in bash("ls /tests /logs")
            # every folder but the system's and the Python runtime's (read-only binds of the host's)
            skip = " ".join(f"--exclude-dir={d}" for d in ("proc", "sys", "dev", "usr", "lib", "lib64", ".venv"))
            found = bash(f"grep -rlF {secret!r} / {skip} 2>/dev/null; echo done")
            assert found.splitlines()[0] == "done", found
            assert "No such file or directory" in bash(f"ls {TERMINAL / 'hidden'}")
        finally:
            client.close()


# --- what is refused, and why -----------------------------------------------------------------


def test_a_multi_container_environment_is_refused(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, extra={"environment/docker-compose.yaml": "services: {}\n"})
    assert refusal(task, env_dir) == [
        "environment/docker-compose.yaml: a multi-container environment (services beside the agent's container) "
        "cannot be mapped: the terminal environment is one sandbox with no network"
    ]


def test_a_prebuilt_image_is_refused(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, toml="[environment]\ndocker_image = 'ghcr.io/x/y:1'\n")
    (task / "environment/Dockerfile").unlink()
    assert refusal(task, env_dir) == [
        "environment/Dockerfile is missing: the task's starting state is unknown",
        "task.toml [environment] docker_image 'ghcr.io/x/y:1': a prebuilt image's contents are unknown to the "
        "importer (it needs environment/Dockerfile)",
    ]


def test_task_toml_workdir_is_the_workspace(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(
        tmp_path,
        dockerfile="FROM debian\nRUN /opt/venv/bin/pip install -q numpy\nCOPY data.txt /srv/task/\n",
        toml="[environment]\nworkdir = '/srv/task'\n",
        extra={"environment/data.txt": "1\n"},
    )
    assert refusal(task, env_dir) == [
        "Dockerfile pip-installs numpy: the agent's python3 has no per-task packages and the sandbox no "
        "network (--ignore-package NAME for one only the tests use)"
    ]
    report = import_harbor_task(task, tasks_dir=env_dir / "tasks", ignore_packages=["numpy"])
    assert report.workdir == "/srv/task"
    assert tree(env_dir / "tasks/task/files") == {"data.txt": b"1\n"}
    assert yaml.safe_load((env_dir / "tasks/task/task.yaml").read_text())["workdir"] == "/srv/task"


def test_a_prebuilt_image_beside_its_dockerfile_is_read_from_the_dockerfile(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, toml="[environment]\ndocker_image = 'alexgshaw/task:20251031'\n")
    report = import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert "[environment] docker_image 'alexgshaw/task:20251031' ignored: read from environment/Dockerfile" in report.notes


def test_a_link_out_of_the_task_is_refused(env_dir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("not for the agent")
    task = make_task(tmp_path, dockerfile="FROM debian\nWORKDIR /app\nCOPY data.txt /app/\n")
    (task / "environment/data.txt").symlink_to(secret)
    problems = refusal(task, env_dir)
    assert problems[0] == "environment/data.txt is a link out of the task folder: nothing outside it is read"
    assert "Dockerfile line 3: COPY data.txt: no such file in environment/" in problems


def test_a_workdir_the_environment_cannot_mount_is_refused(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, dockerfile='FROM debian\nWORKDIR "/my app"\n')
    assert refusal(task, env_dir) == [
        "WORKDIR '/my app': use letters, digits, '.', '_', '-' and '/' only"
    ]


def test_packages_the_environment_lacks_are_refused_with_the_fix(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(
        tmp_path,
        dockerfile="FROM ubuntu\nRUN apt-get update && apt-get install -y --no-install-recommends git jq=1.6 nginx\n"
        "RUN pip install numpy==2.0 'requests>=2'\nWORKDIR /app\n",
    )
    assert refusal(task, env_dir) == [
        f"Dockerfile installs jq, nginx, which the environment does not have: add them to sandbox.system_packages "
        f"in {env_dir / 'openenv.yaml'} (its image installs them), or --ignore-package NAME for one the task does not need",
        "Dockerfile pip-installs numpy, requests: the agent's python3 has no per-task packages and the sandbox no "
        "network (--ignore-package NAME for one only the tests use)",
    ]
    report = import_harbor_task(
        task, tasks_dir=env_dir / "tasks", ignore_packages=["jq", "nginx", "numpy", "requests"]
    )
    assert report.task_id == "task"  # git is in the manifest's system_packages: nothing left to refuse


def test_a_network_verifier_that_is_not_pytest_is_refused(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, test_sh="curl -s https://example.com/check | bash\n")
    assert refusal(task, env_dir) == [
        "tests/test.sh uses the network ('curl'), which the grading sandbox does not have, and is not "
        "Terminal-Bench 2's install-uv-then-pytest script that the importer can run offline"
    ]


def test_a_verifier_that_runs_the_agents_code_itself_is_refused(env_dir: Path, tmp_path: Path) -> None:
    """Its reward would be the agent's to write: test.sh lines that execute the workspace's files
    (pytest tests may: their processes run sandboxed through openenv_sdk.grading.pytest_sandboxed)."""
    test_sh = (
        "#!/bin/bash\ncd /app\nout=$(python3 /app/solve.py 3)\n./run.sh\n"
        "[ \"$(cat /app/out.txt)\" = ok ] && echo 1 > /logs/verifier/reward.txt\n"
    )
    task = make_task(tmp_path, test_sh=test_sh)
    assert refusal(task, env_dir) == [
        f"tests/test.sh runs the agent's code in the verifier ({line!r}): its reward would be the agent's to "
        f"write; run it from a pytest test (its processes run sandboxed) instead"
        for line in ("out=$(python3 /app/solve.py 3)", "./run.sh")
    ]


def test_every_unmappable_part_is_listed_at_once(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(
        tmp_path,
        dockerfile="FROM golang AS build\nFROM debian\nENV PATH=/opt/bin:$PATH\nVOLUME /data\nWORKDIR /app\n",
        toml="[environment]\ngpus = 1\n[verifier.env]\nOPENAI_API_KEY = '${OPENAI_API_KEY}'\n",
        extra={"solution/helper.py": "print()\n"},
    )
    assert refusal(task, env_dir) == [
        "Dockerfile line 2: a second FROM (a multi-stage build) cannot be mapped",
        "Dockerfile line 3: ENV PATH cannot be mapped: the agent's shell has no per-task variables",
        "Dockerfile line 4: VOLUME cannot be mapped to a sandbox workspace",
        "task.toml [environment] gpus: the terminal sandbox has no GPU",
        "task.toml [verifier.env] OPENAI_API_KEY: only fixed values map (a ${VAR} would read the grading host's "
        "environment, such as a judge's API key)",
        "solution/helper.py: only solve.sh is replayed (through the agent's bash tool), without other files",
    ]


def test_a_workdir_in_the_sandbox_system_is_refused(env_dir: Path, tmp_path: Path) -> None:
    for workdir in ("/tmp/x", "/usr/src/app", "/"):
        task = make_task(tmp_path, dockerfile=f"FROM debian\nWORKDIR {workdir}\n")
        assert refusal(task, env_dir) == [
            f"WORKDIR {workdir} cannot be the workspace (it is the sandbox's system or its /tmp); "
            f"use a folder of its own such as /app"
        ]
    task = make_task(tmp_path, dockerfile="FROM debian\nRUN mkdir /app\n")
    assert refusal(task, env_dir) == [
        "Dockerfile: no WORKDIR, so there is no workspace folder to give the agent (add WORKDIR /app)"
    ]


def test_an_existing_task_is_kept_unless_forced(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    import_harbor_task(task, tasks_dir=env_dir / "tasks")
    with pytest.raises(HarborImportError, match="exists: pass overwrite=True"):
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    (task / "instruction.md").write_text("Do the other thing.\n")
    import_harbor_task(task, tasks_dir=env_dir / "tasks", overwrite=True)
    assert "Do the other thing." in (env_dir / "tasks/task/task.yaml").read_text()


def test_a_terminal_bench_1_folder_says_to_convert_it_first(tmp_path: Path) -> None:
    (tmp_path / "task.yaml").write_text("instruction: x\n")
    assert read_harbor_task(tmp_path).problems == [
        "task.toml is missing (a Terminal-Bench 1 task: convert it with Harbor's adapter first)",
        "instruction.md is missing or empty",
    ]


# --- the command --------------------------------------------------------------------------------


def test_the_command_imports_and_reports_refusals(env_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["harbor", "import", str(EXAMPLES / "status-code-summary"), str(EXAMPLES / "fix-fibonacci"),
            "--into", str(env_dir / "tasks"), "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert [r["task_id"] for r in out["imported"]] == ["status_code_summary"]
    assert out["refused"][0]["source"].endswith("fix-fibonacci")
    assert "Dockerfile installs curl" in out["refused"][0]["problems"][0]
    result = runner.invoke(app, [*args, "--ignore-package", "curl", "--force", "--prefix", "tb2_"])
    assert result.exit_code == 0, result.output
    assert [r["task_id"] for r in json.loads(result.stdout)["imported"]] == ["tb2_status_code_summary", "tb2_fix_fibonacci"]
    missing = runner.invoke(app, ["harbor", "import", str(tmp_path / "nope"), "--into", str(env_dir / "tasks")])
    assert missing.exit_code == 2 and "is not a folder" in " ".join(missing.output.split())


def test_verify_plays_each_imported_task_through_the_server(tmp_path: Path) -> None:
    """`--verify` on a copy of the terminal environment holding only the imported tasks: a task
    whose solution needs a tool this system lacks imports, then fails verification."""
    env = tmp_path / "terminal"
    shutil.copytree(TERMINAL, env, ignore=shutil.ignore_patterns("tasks", "hidden", "tests", "__pycache__"))
    (env / "hidden").mkdir()
    shutil.copy(TERMINAL / "hidden" / "lib.sh", env / "hidden" / "lib.sh")
    broken = make_task(
        tmp_path,
        dockerfile="FROM debian\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n",
        test_sh="[ \"$(cat /app/out.json)\" = 1 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
        extra={"solution/solve.sh": "echo '{\"n\": 1}' | no-such-jq-here .n > /app/out.json\n"},
    )
    result = CliRunner().invoke(app, [
        "harbor", "import", str(EXAMPLES / "status-code-summary"), str(broken), "--into", str(env / "tasks"),
        "--ignore-package", "jq", "--verify", "--json",
    ])  # fmt: skip
    assert result.exit_code == 1, result.output
    verified = {v["task_id"]: v for v in json.loads(result.stdout)["verified"]}
    assert (verified["status_code_summary"]["solution"], verified["status_code_summary"]["null"]) == (1.0, 0.0)
    assert verified["status_code_summary"]["ok"] and not verified["task"]["ok"]
    assert (verified["task"]["solution"], verified["task"]["null"]) == (0.0, 0.0)
    assert "Harbor reward 0" in verified["task"]["evidence"]
