"""Harbor tasks with their own Dockerfile and docker-compose file (`own_image=True`).

The task folder `fixtures/stock-report` is written for this: a Dockerfile that puts a tool in
`/usr/local/bin` and its data in `/etc` (outside the workspace: only its own image has them), a
compose file whose main service sets an environment variable, Harbor's log mounts and limits,
and a three-step pytest check that also runs the agent's script. It is imported into a copy of
the terminal environment, its image built on the local base (`$OPENENV_BASE_IMAGE`), and played
through the real server in a real container (OPENENV_TEST_CONTAINERS=1): the reference solution
scores 1.0, doing nothing 0.0, one step undone 0.0. The attacks on this setup (reading the
verifier's files, planting what pytest or the reward reader would pick up) are in
tests/security/test_attack_harbor_image.py. Every image and container made here is labelled and removed.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.harbor import HarborComposeError, HarborImportError, import_harbor_task
from openenv_sdk.harbor._image import LABEL_TASK, ImagePlan, plan_image, task_dockerfile
from openenv_sdk.terminal_task import TASK_ENV_NAMES, TASK_IMAGE_ENV
from tests.harbor.own_image_kit import (
    CANARY,
    FIXTURE,
    ROOT,
    TB2_FIXTURE,
    Built,
    bash,
    built_fixture,
    grade_episode,
    requires_engine,
    terminal_copy,
)

pytestmark = pytest.mark.timeout(600)  # the module's image is built in the first container test's setup


def harbor_task(root: Path, files: dict[str, str]) -> Path:
    """The fixture with some files replaced (`None`-free: each path -> new text)."""
    task = root / "task"
    shutil.copytree(FIXTURE, task)
    for relative, text in files.items():
        (task / relative).parent.mkdir(parents=True, exist_ok=True)
        (task / relative).write_text(text)
    return task


def compose_refusal(tmp_path: Path, compose: str) -> HarborComposeError:
    env = terminal_copy(tmp_path)
    task = harbor_task(tmp_path, {"environment/docker-compose.yaml": compose})
    with pytest.raises(HarborComposeError) as caught:
        import_harbor_task(task, tasks_dir=env / "tasks", own_image=True)
    assert not any((env / "tasks").iterdir()), "a refused task wrote nothing"
    return caught.value


# --- the import (no engine) -------------------------------------------------------------------


def test_the_import_keeps_the_environment_for_the_build_and_the_tests_on_the_host(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    report = import_harbor_task(FIXTURE, tasks_dir=env / "tasks", own_image=True)
    assert (report.task_id, report.workdir, report.difficulty) == ("stock_report", "/app", "easy")
    spec = yaml.safe_load((env / "tasks/stock_report/task.yaml").read_text())
    assert spec["image"] is True and spec["harbor"] is True and spec["workdir"] == "/app"
    written = sorted(p.relative_to(env / "tasks/stock_report").as_posix() for p in (env / "tasks/stock_report").rglob("*") if p.is_file())
    assert written == [
        "environment/Dockerfile", "environment/data/orders.csv", "environment/docker-compose.yaml",
        "environment/tools/stockctl", "task.yaml",
    ]  # fmt: skip
    assert not any(CANARY in p.read_text() for p in (env / "tasks").rglob("*") if p.is_file()), "tests stay in hidden/"
    assert CANARY in (env / "hidden/stock_report/tests/test_outputs.py").read_text()
    assert any("services.main image, command, deploy ignored" in n for n in report.notes)
    assert any("volume ${HOST_VERIFIER_LOGS_PATH}" in n for n in report.notes)


def test_without_own_image_the_same_task_is_refused_as_before(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    with pytest.raises(HarborImportError) as caught:
        import_harbor_task(FIXTURE, tasks_dir=env / "tasks")
    assert any("docker-compose.yaml: a multi-container environment" in p for p in caught.value.problems)
    assert any("outside the workspace /app" in p for p in caught.value.problems)


def test_the_plan_reads_compose_and_dockerfile(tmp_path: Path) -> None:
    plan = plan_image(FIXTURE / "environment", source=FIXTURE)
    assert plan.problems == []
    assert (plan.dockerfile, plan.context, plan.workdir) == ("Dockerfile", ".", "/app")
    assert plan.environment == {"REPORT_TITLE": "Stock left after orders"}
    assert plan.env_names == ["STOCK_FILE", "REPORT_TITLE"]


def test_the_task_dockerfile_is_built_on_the_server_image_and_gives_it_back_to_the_server() -> None:
    plan = ImagePlan(environment={"A": 'x "y"'}, env_names=["A"], workdir="/app")
    text = task_dockerfile(
        "ARG V=1\nFROM python:3.13-slim AS base\nRUN echo hi\nHEALTHCHECK --interval=5s \\\n  CMD curl -f localhost\nUSER nobody\n"
        'CMD ["sleep", "infinity"]\n',
        server_image="openenv-terminal:latest",
        server_config={"User": "", "WorkingDir": "/env", "Cmd": ["openenv", "serve", "/env"], "Entrypoint": None},
        task_id="t1",
        plan=plan,
    )
    lines = text.splitlines()
    assert lines[:3] == ["ARG V=1", "# FROM python:3.13-slim AS base  (replaced by openenv harbor build: the environment's server image)", "FROM openenv-terminal:latest"]
    assert lines[4:6] == [
        "# HEALTHCHECK --interval=5s \\  (dropped by openenv harbor build)",
        "#   CMD curl -f localhost  (dropped by openenv harbor build)",
    ]
    assert lines[-5:] == [
        f'ENV A="x \\"y\\"" {TASK_IMAGE_ENV}="t1" {TASK_ENV_NAMES}="A"',
        "USER root",
        "WORKDIR /env",
        "ENTRYPOINT []",
        'CMD ["openenv", "serve", "/env"]',
    ]


@pytest.mark.parametrize(
    ("compose", "keys"),
    [
        ("services:\n  main:\n    build: .\n    privileged: true\n    ports: ['8080:80']\n", ["services.main.privileged", "services.main.ports"]),
        ("services:\n  main:\n    build: .\n    cap_add: [SYS_ADMIN]\n    network_mode: host\n", ["services.main.cap_add", "services.main.network_mode"]),
        ("services:\n  main:\n    build: .\nvolumes:\n  data: {}\nsecrets: {}\n", ["volumes", "secrets"]),
        ("services:\n  main:\n    build: {context: ., args: {X: '1'}}\n", ["services.main.build.args"]),
    ],
)
def test_compose_keys_outside_the_subset_are_refused_by_name(tmp_path: Path, compose: str, keys: list[str]) -> None:
    """A compose key the builder does not support (privileged, ports, cap_add, network_mode, ...) is refused by name."""
    error = compose_refusal(tmp_path, compose)
    assert sorted(error.keys) == sorted(keys)
    for key in keys:
        assert f"environment/docker-compose.yaml: {key} is not supported" in "\n".join(error.problems)


def test_harbors_context_dir_variable_is_the_environment_folder(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    compose = "services:\n  main:\n    build:\n      context: ${CONTEXT_DIR}\n    environment: {REPORT_TITLE: Été}\n"
    task = harbor_task(tmp_path, {"environment/docker-compose.yaml": compose})
    report = import_harbor_task(task, tasks_dir=env / "tasks", own_image=True)
    assert any("build.context ${CONTEXT_DIR} read as environment/" in n for n in report.notes)
    plan = plan_image(env / "tasks" / report.task_id / "environment", source=task)
    assert plan.problems == []
    assert (plan.context, plan.environment) == (".", {"REPORT_TITLE": "Été"})
    assert 'REPORT_TITLE="Été"' in task_dockerfile("FROM x\n", server_image="s", server_config={}, task_id="t", plan=plan)


def test_services_beside_the_main_one_are_refused(tmp_path: Path) -> None:
    error = compose_refusal(tmp_path, "services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n")
    assert error.keys == ["services.db"]
    assert "services db beside the main one (main) are not supported" in error.problems[0]


@pytest.mark.parametrize(
    ("compose", "key"),
    [
        ("services:\n  main:\n    build: ../..\n", "services.main.build.context"),
        ("services:\n  main:\n    build: {context: ., dockerfile: /etc/passwd}\n", "services.main.build.dockerfile"),
        ("services:\n  main:\n    build: .\n    environment: [API_KEY]\n", "services.main.environment.API_KEY"),
        ("services:\n  main:\n    build: .\n    environment: {TOKEN: '${HOST_TOKEN}'}\n", "services.main.environment.TOKEN"),
        ("services:\n  main:\n    build: .\n    volumes: ['/var/run/docker.sock:/var/run/docker.sock']\n", "services.main.volumes"),
        ("services:\n  main:\n    image: ghcr.io/x/y:1\n", "services.main.image"),
    ],
)
def test_compose_values_that_reach_outside_the_task_are_refused(tmp_path: Path, compose: str, key: str) -> None:
    """A build context outside environment/, a host variable, a host mount or a prebuilt image is refused by name."""
    assert compose_refusal(tmp_path, compose).keys == [key]


def test_a_compose_file_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    error = compose_refusal(tmp_path, "services: [\n")
    assert "docker-compose.yaml does not parse" in error.problems[0]


def test_a_multi_stage_dockerfile_is_refused(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    task = harbor_task(tmp_path, {"environment/Dockerfile": "FROM a AS b\nRUN true\nFROM c\nCOPY --from=b /x /app/x\nWORKDIR /app\n"})
    with pytest.raises(HarborImportError) as caught:
        import_harbor_task(task, tasks_dir=env / "tasks", own_image=True)
    assert any("2 FROM lines" in p for p in caught.value.problems)
    assert any("COPY --from (a multi-stage build)" in p for p in caught.value.problems)


def test_the_cli_imports_with_own_image(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    result = CliRunner().invoke(app, ["harbor", "import", str(FIXTURE), "--into", str(env / "tasks"), "--own-image", "--json"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((env / "tasks/stock_report/task.yaml").read_text())["image"] is True


def test_a_server_outside_the_task_image_refuses_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared terminal server refuses a task with its own image (its files and tools are not there)."""
    env = terminal_copy(tmp_path)
    import_harbor_task(FIXTURE, tasks_dir=env / "tasks", own_image=True)
    monkeypatch.delenv(TASK_IMAGE_ENV, raising=False)
    module = _load_env_module(env)
    environment = module.TerminalEnvironment()
    with pytest.raises(ValueError, match="brings its own image: serve the image that `openenv harbor build"):
        environment.reset(task_id="stock_report")
    environment.close()


def _load_env_module(env: Path) -> Any:
    name = f"harbor_terminal_env_{abs(hash(env))}"
    spec = importlib.util.spec_from_file_location(name, env / "terminal_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- built and played in a real container -----------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    with built_fixture(tmp_path_factory.mktemp("own_image"), suffix="tests", fixtures=(FIXTURE, TB2_FIXTURE)) as value:
        yield value


@pytest.fixture(scope="module")
def served(built: Built) -> Iterator[Any]:
    from openenv_sdk.client import GenericEnvClient

    with GenericEnvClient(image=built.image, timeout_s=120) as env:
        yield env


@requires_engine
def test_the_image_is_labelled_and_holds_the_task(built: Built) -> None:
    from openenv_sdk.containers.engine import connect_engine

    engine = connect_engine()
    try:
        labels = engine.images.get(built.image).labels
    finally:
        engine.close()
    assert labels[LABEL_TASK] == "stock_report" and labels["org.openenv.test"] == "harbor-own-image"


@requires_engine
def test_the_agent_works_in_the_task_image(built: Built, served: Any) -> None:
    """The agent's commands run in the task's system: its tool, its /etc data, its ENV and compose environment."""
    served.reset(task_id="stock_report")
    out = bash(served, 'pwd; ls; command -v stockctl; stockctl get gadgets; echo "[$REPORT_TITLE] [$STOCK_FILE]"; id -u')
    lines = out.splitlines()
    assert lines[:5] == ["/app", "orders.csv", "/usr/local/bin/stockctl", "5", "[Stock left after orders] [/etc/inventory/stock.conf]"], out
    assert lines[5] != "0", "the agent is not root"
    # the image's system is read-only to it, and setuid programs give it nothing
    out = bash(served, "touch /etc/inventory/x /usr/local/bin/x 2>&1 | wc -l; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status")
    assert sorted(out.split("[exit code")[0].split()) == sorted(["2", "NoNewPrivs:", "1", "CapEff:", "0000000000000000"]), out


@requires_engine
def test_the_reference_solution_scores_1_and_nothing_scores_0(built: Built, served: Any) -> None:
    served.reset(task_id="stock_report")
    solution = (built.env / "hidden/stock_report/solution.sh").read_text()
    bash(served, solution)
    score = grade_episode(built, served)
    assert score.value == 1.0, score.evidence
    check = next(iter(score.evidence.values()))
    assert "3 passed" in check["output"], check["output"]
    served.reset(task_id="stock_report")
    assert grade_episode(built, served).value == 0.0


@requires_engine
def test_a_partial_solution_scores_0(built: Built, served: Any) -> None:
    """The multi-step check: a right report with no script (one step of three undone) scores 0."""
    served.reset(task_id="stock_report")
    bash(served, "printf 'Stock left after orders\\ngadgets: 2\\nwidgets: 1\\n' > /app/report.txt")
    score = grade_episode(built, served)
    assert score.value == 0.0
    assert "2 passed" in next(iter(score.evidence.values()))["output"]


@requires_engine
def test_verify_imported_plays_each_task_in_its_image(built: Built) -> None:
    """Both fixtures, each in its own image: the reference solution 1.0, nothing 0.0."""
    from openenv_sdk.harbor import verify_imported

    results = verify_imported(built.env, list(built.images), image_tags=built.images)
    assert [(r.task_id, r.solution, r.null) for r in results] == [("stock_report", 1.0, 0.0), ("fix_service_config", 1.0, 0.0)], [
        r.evidence for r in results
    ]


@requires_engine
def test_a_terminal_bench_2_shaped_task_runs_in_its_image(built: Built) -> None:
    """ENV PATH reaches the agent's shell; the uvx test.sh runs offline with the server's pytest."""
    from openenv_sdk.client import GenericEnvClient

    test_sh = (built.env / "hidden/fix_service_config/tests/test.sh").read_text()
    assert '"${PYTHON:-python3}" -m pytest -p no:cacheprovider /tests/test_outputs.py -rA' in test_sh
    with GenericEnvClient(image=built.images["fix_service_config"], timeout_s=120) as env:
        env.reset(task_id="fix_service_config")
        out = bash(env, "pwd; command -v validate-config; validate-config config.json")
        assert out.splitlines()[:2] == ["/workspace/service", "/opt/validator/bin/validate-config"], out
        assert "invalid:" in out
        bash(env, "sed -i 's/\"port\": 80,/\"port\": 8080,/' config.json")  # still not JSON (the trailing comma)
        score = grade_episode(built, env)
        assert score.value == 0.0 and "1 passed" not in next(iter(score.evidence.values()))["output"]
        bash(env, built.solution("fix_service_config"))
        assert grade_episode(built, env).value == 1.0


class ScriptedPolicy:
    """A chat-completions endpoint on the host (every address, as an interception server listens)
    that answers as a scripted policy: the task's reference solution through `bash`, then `submit`."""

    def __init__(self, command: str) -> None:
        self.key = "sk-" + secrets.token_hex(8)
        self.requests: list[dict[str, Any]] = []
        replies = [{"name": "bash", "arguments": json.dumps({"command": command})}, {"name": "submit", "arguments": "{}"}]
        policy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {policy.key}" or not self.path.endswith("/chat/completions"):
                    self.send_response(401)
                    self.end_headers()
                    return
                turn = len(policy.requests)
                policy.requests.append(body)
                call = replies[min(turn, len(replies) - 1)]
                message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{turn}", "type": "function", "function": call}]}
                data = json.dumps({"id": f"r{turn}", "object": "chat.completion", "model": body.get("model"),
                                   "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@requires_engine
def test_an_agent_program_runs_in_the_task_image_against_a_model_endpoint(built: Built, served: Any) -> None:
    """The built-in agent runs in the task's container (its sandbox, the endpoint relayed in) and is graded host-side."""
    from openenv_sdk.agents import BUILTIN_AGENT, AgentLaunch, AgentRun

    solve = (FIXTURE / "solution" / "solve.sh").read_text()
    policy = ScriptedPolicy(solve)
    try:
        served.reset(task_id="stock_report")
        host = served.provider.host_address
        launch = AgentLaunch(spec=BUILTIN_AGENT, base_url=f"http://{host}:{policy.port}/v1", api_key=policy.key, model="scripted")  # type: ignore[arg-type]  # pydantic takes the str
        run = AgentRun.model_validate(served.call("run_agent", launch=launch.to_wire()))
    finally:
        policy.close()
    assert run.ok, run
    assert len(policy.requests) == 2, "the agent's model calls went to the endpoint"
    assert "stockctl" in policy.requests[0]["messages"][1]["content"], "it was given the task's instruction"
    assert policy.requests[1]["messages"][-1]["role"] == "tool", "the bash call's result came back to the policy"
    assert policy.key not in run.stdout_tail + run.stderr_tail
    score = grade_episode(built, served)
    assert score.value == 1.0, score.evidence


def test_the_cli_build_refuses_a_task_without_its_own_image(tmp_path: Path) -> None:
    env = terminal_copy(tmp_path)
    import_harbor_task(ROOT / "examples/harbor/status-code-summary", tasks_dir=env / "tasks")
    result = CliRunner().invoke(app, ["harbor", "build", str(env), "status_code_summary"])
    assert result.exit_code == 1, result.output
    assert "not a task with its own image" in result.output and "--own-image" in result.output
    result = CliRunner().invoke(app, ["harbor", "build", str(env), "no_such_task"])
    assert result.exit_code == 1 and "task.yaml does not exist" in result.output.replace("\n", "")
