"""`openenv deploy`: the Kubernetes objects for an image, on stdout or in a file only we can read."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml
from typer.testing import CliRunner

from openenv_sdk.cli.main import app

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"
runner = CliRunner()


def test_deploy_prints_the_objects() -> None:
    result = runner.invoke(app, ["deploy", str(ECHO_DIR), "--image", "img:1", "--replicas", "2", "--namespace", "rl"])
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all(result.stdout))
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [
        ("Secret", "rl"), ("Deployment", "rl"), ("Service", "rl"), ("NetworkPolicy", "rl")
    ]
    assert objects[1]["spec"]["replicas"] == 2


def test_deploy_writes_a_private_file(tmp_path: Path) -> None:
    out = tmp_path / "echo.yaml"
    result = runner.invoke(app, ["deploy", str(ECHO_DIR), "--image", "img:1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [o["kind"] for o in yaml.safe_load_all(out.read_text())] == ["Secret", "Deployment", "Service", "NetworkPolicy"]


def test_deploy_of_a_folder_without_manifest_says_what_to_run(tmp_path: Path) -> None:
    result = runner.invoke(app, ["deploy", str(tmp_path), "--image", "img:1"])
    assert result.exit_code == 2
    assert "Example: openenv deploy environments/echo --image openenv-echo:0.1.0" in result.output


def test_deploy_selects_the_clients_and_the_apparmor_profile() -> None:
    args = ["deploy", str(ECHO_DIR.parent / "terminal"), "--image", "img:1", "--allow-from-namespace", "team=rl",
            "--allow-from-pod", "app=trainer", "--apparmor", "localhost/openenv-bwrap", "--user-namespace"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    _, deployment, _, policy = yaml.safe_load_all(result.stdout)
    assert policy["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "rl"}}, "podSelector": {"matchLabels": {"app": "trainer"}}}
    ]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    assert pod["containers"][0]["securityContext"]["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "openenv-bwrap"}


def test_deploy_refuses_a_label_without_a_value_separator() -> None:
    result = runner.invoke(app, ["deploy", str(ECHO_DIR), "--image", "img:1", "--allow-from-pod", "trainer"])
    assert result.exit_code == 2
    assert "--allow-from-pod takes KEY=VALUE (a label), got 'trainer'" in result.output
