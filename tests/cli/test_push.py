"""`openenv push`: the staged Space folder's exact content, the exact Hub calls (made on a
recording stand-in for `HfApi`: the Hub cannot be reached from tests), and secrets never shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.cli.push import PushError, push_space, space_readme, stage_space
from openenv_sdk.manifest import Manifest

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
SECRET_VALUE = "hf-secret-value-that-must-never-show"

runner = CliRunner()


class RecordingHfApi:
    """Stands in for `huggingface_hub.HfApi`: records each call (and what `upload_folder` would send)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.uploaded: list[str] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/spaces/{repo_id}"

    def add_space_variable(self, repo_id: str, key: str, value: str, **kwargs: Any) -> None:
        self.calls.append(("add_space_variable", {"repo_id": repo_id, "key": key, "value": value, **kwargs}))

    def add_space_secret(self, repo_id: str, key: str, value: str, **kwargs: Any) -> None:
        self.calls.append(("add_space_secret", {"repo_id": repo_id, "key": key, "value": value, **kwargs}))

    def upload_folder(self, *, folder_path: str, **kwargs: Any) -> None:
        self.calls.append(("upload_folder", {"folder_path": folder_path, **kwargs}))
        root = Path(folder_path)
        self.uploaded = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def _default_base_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_BASE_IMAGE", raising=False)


def env_with_variables(root: Path) -> Path:
    """The echo environment, with manifest variables and a README that has front matter."""
    root.mkdir()
    (root / "echo_env.py").write_text((ECHO_DIR / "echo_env.py").read_text())
    manifest = (ECHO_DIR / "openenv.yaml").read_text() + "variables:\n  LOG_LEVEL: debug\n  RETRIES: 3\n"
    (root / "openenv.yaml").write_text(manifest)
    (root / "README.md").write_text("---\ntitle: Echo Env\nemoji: 🔊\ntags: [demo, openenv]\n---\n# Echo\n\nSays it back.\n")
    return root


def front_matter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_staged_space_for_the_echo_environment(tmp_path: Path) -> None:
    files = stage_space(ECHO_DIR, tmp_path)
    assert [f for f in files if not f.startswith("wheels/")] == ["Dockerfile", "README.md", "env/README.md", "env/echo_env.py",
                                                                  "env/openenv.yaml"]
    assert any(f.startswith("wheels/sdk/openenv_sdk-") and f.endswith(".whl") for f in files)
    assert "wheels/deps/requirements.txt" in files
    assert any(f.startswith("wheels/deps/pydantic-") for f in files)

    assert front_matter((tmp_path / "README.md").read_text()) == {
        "title": "echo", "sdk": "docker", "app_port": 8000, "tags": ["openenv"], "pinned": False,
        "short_description": "Echoes every message back; the smallest complete environm...",
    }
    dockerfile = (tmp_path / "Dockerfile").read_text().splitlines()
    assert "FROM python:3.11-slim" in dockerfile
    assert "COPY --chown=10001:10001 env /env" in dockerfile
    assert "EXPOSE 8000" in dockerfile
    assert 'CMD ["openenv", "serve", "/env", "--host", "0.0.0.0", "--port", "8000"]' in dockerfile
    assert any(line.startswith("RUN pip install --no-index") for line in dockerfile)


def test_a_staged_space_holds_no_hidden_path_and_no_oracle(tmp_path: Path) -> None:
    # The Space is a public image: hidden tests and the oracle (which may hold the answers) stay on
    # the host, exactly as `openenv build` leaves them out.
    folder = tmp_path / "guess"
    assert runner.invoke(app, ["init", "guess", "--dir", str(tmp_path)]).exit_code == 0
    (folder / "hidden").mkdir()
    (folder / "hidden" / "answers.json").write_text('{"seed-0": 42}\n')
    (tmp_path / "space").mkdir()
    files = stage_space(folder, tmp_path / "space")
    assert "env/guess_env.py" in files and "env/grader.py" in files
    assert not [f for f in files if f.startswith("env/hidden") or f.endswith("oracle.py")], files


def test_space_readme_keeps_the_authors_keys_and_sets_the_spaces() -> None:
    manifest = Manifest(name="echo", port=7860, description="Says it back.")
    text = space_readme(manifest, "---\ntitle: Echo Env\nemoji: 🔊\nsdk: gradio\ntags: [demo, openenv]\n---\n# Echo\n")
    assert front_matter(text) == {"title": "Echo Env", "emoji": "🔊", "sdk": "docker", "tags": ["openenv", "demo"],
                                  "app_port": 7860, "pinned": False, "short_description": "Says it back."}
    assert text.endswith("---\n\n# Echo\n")


def test_space_readme_without_a_readme_is_generated() -> None:
    text = space_readme(Manifest(name="echo", description="x" * 80), None)
    assert front_matter(text)["short_description"] == "x" * 57 + "..."
    assert text.endswith("# echo\n\n" + "x" * 80 + "\n")


def test_folder_with_its_own_dockerfile_is_staged_as_it_is(tmp_path: Path) -> None:
    source = tmp_path / "custom"
    (source / "server").mkdir(parents=True)
    (source / "openenv.yaml").write_text("name: custom\napp: server.app:app\nport: 7860\n")
    (source / "server" / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY . /app\n")
    (source / "server" / "app.py").write_text("app = None\n")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.pyc").write_bytes(b"")
    staged = tmp_path / "staged"
    assert stage_space(source, staged) == ["Dockerfile", "README.md", "openenv.yaml", "server/Dockerfile",
                                           "server/app.py"]
    assert (staged / "Dockerfile").read_text() == "FROM python:3.11-slim\nCOPY . /app\n"
    assert front_matter((staged / "README.md").read_text())["app_port"] == 7860


def test_push_makes_exactly_these_calls_and_never_prints_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = RecordingHfApi()
    plan = push_space(env_with_variables(tmp_path / "echo"), "my-org/echo", private=True,
                      secrets={"OPENAI_API_KEY": SECRET_VALUE}, api=api)
    folder = str(plan.folder)
    assert api.calls == [
        ("create_repo", {"repo_id": "my-org/echo", "repo_type": "space", "space_sdk": "docker", "private": True,
                         "exist_ok": True}),
        ("add_space_variable", {"repo_id": "my-org/echo", "key": "LOG_LEVEL", "value": "debug"}),
        ("add_space_variable", {"repo_id": "my-org/echo", "key": "RETRIES", "value": "3"}),
        ("add_space_secret", {"repo_id": "my-org/echo", "key": "OPENAI_API_KEY", "value": SECRET_VALUE}),
        ("upload_folder", {"folder_path": folder, "repo_id": "my-org/echo", "repo_type": "space",
                           "commit_message": "openenv push: echo 0.1.0"}),
    ]
    assert api.uploaded == plan.files and "Dockerfile" in api.uploaded
    assert not plan.folder.exists()  # the temporary staging folder is removed
    out = capsys.readouterr()
    assert SECRET_VALUE not in out.out + out.err
    assert "add_space_secret(repo_id='my-org/echo', key='OPENAI_API_KEY', value=***)" in " ".join(out.out.split())


def test_dry_run_makes_no_call(tmp_path: Path) -> None:
    api = RecordingHfApi()
    plan = push_space(ECHO_DIR, "my-org/echo", dry_run=True, api=api, stage_dir=tmp_path / "space")
    assert api.calls == []
    assert [c.method for c in plan.calls] == ["create_repo", "upload_folder"]
    assert (tmp_path / "space" / "Dockerfile").is_file()  # a stage folder that was asked for is kept


def test_cli_dry_run_lists_files_and_calls_and_masks_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_VALUE)
    result = runner.invoke(app, ["push", str(env_with_variables(tmp_path / "echo")), "--repo-id", "my-org/echo",
                                 "--dry-run", "--secret", "OPENAI_API_KEY"])
    assert result.exit_code == 0, result.output
    assert SECRET_VALUE not in result.output
    text = " ".join(result.stdout.split())
    assert "Space my-org/echo staged" in text and " Dockerfile " in text and "env/echo_env.py" in text
    assert "Variables: LOG_LEVEL=debug, RETRIES=3" in text
    assert "Secrets: OPENAI_API_KEY=***" in text
    assert "create_repo(repo_id='my-org/echo', repo_type='space', space_sdk='docker', private=False, exist_ok=True)" in text
    assert "Dry run: nothing was sent." in text


def test_cli_dry_run_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_VALUE)
    result = runner.invoke(app, ["push", str(ECHO_DIR), "--repo-id", "my-org/echo", "--dry-run", "--json",
                                 "--secret", "OPENAI_API_KEY"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["url"] == "https://huggingface.co/spaces/my-org/echo"
    assert report["calls"][1] == {"method": "add_space_secret",
                                  "kwargs": {"repo_id": "my-org/echo", "key": "OPENAI_API_KEY", "value": "***"}}
    assert SECRET_VALUE not in result.output


def test_secret_given_with_a_value_is_refused_without_echoing_it() -> None:
    result = runner.invoke(app, ["push", str(ECHO_DIR), "--repo-id", "a/b", "--dry-run",
                                 "--secret", f"TOKEN={SECRET_VALUE}"])
    assert result.exit_code == 2
    assert SECRET_VALUE not in result.output
    assert "--secret takes a variable name, not a value: --secret TOKEN" in " ".join(result.stderr.split())


def test_secret_missing_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    result = runner.invoke(app, ["push", str(ECHO_DIR), "--repo-id", "a/b", "--dry-run", "--secret", "NOT_SET_ANYWHERE"])
    assert result.exit_code == 2
    assert "the environment variable NOT_SET_ANYWHERE is not set" in " ".join(result.stderr.split())


@pytest.mark.parametrize("repo_id", ["echo", "a/b/c", "/echo", "org/"])
def test_bad_repo_id_is_bad_usage(repo_id: str) -> None:
    result = runner.invoke(app, ["push", str(ECHO_DIR), "--repo-id", repo_id, "--dry-run"])
    assert result.exit_code == 2 and "expected ORG/NAME" in result.stderr
    with pytest.raises(PushError, match="expected ORG/NAME"):
        push_space(ECHO_DIR, repo_id, dry_run=True)


def test_bad_manifest_is_one_line_and_the_next_command(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("name: x\nport: eighty\n")
    result = runner.invoke(app, ["push", str(tmp_path), "--repo-id", "a/b", "--dry-run"])
    assert result.exit_code == 1
    assert f"Check the folder with: openenv validate {tmp_path} --static-only" in " ".join(result.stderr.split())


def test_a_base_image_the_space_cannot_pull_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PushError, match="local to this machine"):
        stage_space(ECHO_DIR, tmp_path / "a", base_image="localhost/openenv-base:bookworm")
    other = f"python:{sys.version_info[0]}.{sys.version_info[1] + 1}-slim"
    with pytest.raises(PushError, match="the wheels are prepared for this Python"):
        stage_space(ECHO_DIR, tmp_path / "b", base_image=other)
