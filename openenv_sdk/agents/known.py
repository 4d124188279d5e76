"""Specs of third-party CLI agents, installed from a package registry and checked end to end.

Pi (`PI`, `PI_RESPONSES`, `PI_ANTHROPIC`: one agent in the three dialects), Claude Code
(`CLAUDE_CODE`), Codex CLI (`CODEX`) and OpenCode (`OPENCODE`) come from npm (node from the
image) and are verified by `trainers/tests/test_agents_e2e.py` in the terminal environment's
sandbox (docs/agents.md has their versions, needs and start-up costs); Terminus-2 (`TERMINUS_2`,
harbor's agent loop and its tmux, both in the sandbox: `terminus.py`) comes from PyPI and is
verified by `trainers/tests/test_terminus_e2e.py`; mini-swe-agent comes from PyPI too:

`MINI_SWE_AGENT` is [mini-swe-agent](https://pypi.org/project/mini-swe-agent/) 2.4.6 (SWE-agent's
minimal agent: one bash tool, litellm for its model calls), run non-interactively with `mini`.
Verified by `trainers/tests/test_mini_swe_agent.py` (example: `examples/agents/mini_swe_agent_intercepted.py`):
the install from PyPI with the sandbox's `python3` (about 55 s cold; a 740 MB venv, litellm pulls
pandas and pyarrow), then episodes against the trainer's interception server, as a subprocess and
in the terminal environment's sandbox (`run_agent`): every model call (one non-streamed
`chat/completions` request per step) is answered by a scripted policy, the agent runs the
policy's `bash` command itself and exits 0 once it submits with
`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (two calls, about 5 s, 3 of them startup). With a
wrong key it exits 1 at once (401, nothing reaches the trainer); when the trainer closes the
rollout, it exits 1 after the one refused call (410).

What the settings do:

- `mini -y --exit-immediately`: no confirmation before commands, none at the end; stdin is
  `/dev/null` so nothing can wait for a terminal, and `MSWEA_CONFIGURED` skips the first-run
  setup prompt. `step_limit: 50` bounds the steps (the spec's `timeout_s` bounds the time).
- `cost_tracking: ignore_errors` and `cost_limit: 0`: litellm knows no price for the policy, and
  mini-swe-agent otherwise aborts the run on the first answer ("Error calculating cost").
- `MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT=1`: a failed model call ends the run at once instead of
  being retried 10 times with exponential back-off (about 5 minutes; the interception server
  answers 504 or 410 only when the trainer gave up on the rollout). For a real provider
  (`black_box` mode), raise it with `spec.model_copy(update={"env": {...}})`.
- `LITELLM_LOCAL_MODEL_COST_MAP=True`: litellm does not fetch its price list from the network on
  import (the sandbox may have none); `_TYPER_STANDARD_TRACEBACK=1`: a crash prints a plain
  traceback (the default rich one takes 6 s to render).

`MINI_SWE_AGENT_TEXT` is the same agent with its text-based protocol: no tools in the request; the
answer's content carries one ```` ```mswea_bash_command ```` block (easier for a small policy).
"""

from __future__ import annotations

import json
from pathlib import Path

from .spec import AgentSpec

__all__ = ["CLAUDE_CODE", "CLAUDE_CODE_VERSION", "CODEX", "CODEX_VERSION", "OPENCODE", "OPENCODE_VERSION", "MINI_SWE_AGENT", "MINI_SWE_AGENT_TEXT", "MINI_SWE_AGENT_VERSION", "PI", "PI_ANTHROPIC", "PI_RESPONSES", "PI_VERSION", "HARBOR_VERSION", "TERMINUS_2"]

MINI_SWE_AGENT_VERSION = "2.4.6"

_MSWEA_VENV = f"${{OPENENV_AGENTS_DIR:-/tmp/openenv-agents}}/mini-swe-agent-{MINI_SWE_AGENT_VERSION}"
"""Where it is installed: once per sandbox (container or host), like the environment's own install
marker; not under HOME, which a sandbox may remake for every episode. `OPENENV_AGENTS_DIR` moves it
(a cache shared between runs, or a folder baked into the image)."""

_MSWEA_REQUIREMENTS = (f"mini-swe-agent=={MINI_SWE_AGENT_VERSION}", "litellm[mcp]==1.106.2")
"""What is installed, pinned to the versions verified together (litellm is not pinned by
mini-swe-agent, and a later one may behave differently). litellm's `mcp` extra is needed: litellm 1.106 imports `mcp` on every request
that offers tools (a missing dependency of its own), and without it the tool-call agent dies on
its first model call with `ModuleNotFoundError: No module named 'mcp'`."""

_MSWEA_INSTALL = (
    f'V="{_MSWEA_VENV}"; R="{" ".join(_MSWEA_REQUIREMENTS)}"; '
    'test "$(cat "$V/.installed" 2>/dev/null)" = "$R" || { rm -rf "$V" && P=$(command -v python3 || echo {python}) && "$P" -m venv "$V" '
    '&& "$V/bin/pip" install -q --disable-pip-version-check '
    + " ".join(f'"{r}"' for r in _MSWEA_REQUIREMENTS)
    + ' && printf "%s\\n" "$R" > "$V/.installed"; }'
)
"""Idempotent: skipped when the marker file names the same requirements; redone from scratch otherwise."""

_PYPI = ["pypi.org", "files.pythonhosted.org"]
"""The install reaches PyPI and nothing else (through the sandbox's allowlist proxy)."""

_MSWEA_ENV = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "NO_COLOR": "1",
    "_TYPER_STANDARD_TRACEBACK": "1",
}


def _mswea_config(model_class: str) -> str:
    return f"""\
# openenv: mini-swe-agent settings, merged over its built-in config.
agent:
  mode: yolo
  confirm_exit: false
  cost_limit: 0
  step_limit: 50
model:
  model_class: {model_class}
  model_name: "openai/{{model}}"
  cost_tracking: ignore_errors
  model_kwargs:
    api_base: "{{base_url}}"
    drop_params: true
"""


def _mswea_run(builtin_config: str, config_path: str) -> str:
    return (
        f'"{_MSWEA_VENV}/bin/mini" -y --exit-immediately -c {builtin_config} -c "$HOME/{config_path}" '
        '-t "$(cat {task_file})" < /dev/null'
    )


MINI_SWE_AGENT = AgentSpec(
    name="mini-swe-agent",
    install=_MSWEA_INSTALL,
    run=_mswea_run("mini.yaml", ".config/openenv/mini-swe-agent.yaml"),
    env=_MSWEA_ENV,
    config_path=".config/openenv/mini-swe-agent.yaml",
    config=_mswea_config("litellm"),
    install_timeout_s=600.0,
    install_allow=_PYPI,
)
"""mini-swe-agent with tool calls: each request offers one `bash` tool; answer with a `bash` call."""

MINI_SWE_AGENT_TEXT = AgentSpec(
    name="mini-swe-agent-text",
    install=_MSWEA_INSTALL,
    run=_mswea_run("mini_textbased.yaml", ".config/openenv/mini-swe-agent-text.yaml"),
    env=_MSWEA_ENV,
    config_path=".config/openenv/mini-swe-agent-text.yaml",
    config=_mswea_config("litellm_textbased"),
    install_timeout_s=600.0,
    install_allow=_PYPI,
)
"""mini-swe-agent text-based: no tools; answer with one ```` ```mswea_bash_command ```` block."""


# --- agents from the npm registry -------------------------------------------------------------

_NPM = ["registry.npmjs.org"]
"""An npm install reaches the npm registry and nothing else (through the sandbox's allowlist proxy)."""


def _npm_folder(name: str, version: str) -> str:
    return f"${{OPENENV_AGENTS_DIR:-/tmp/openenv-agents}}/{name}-{version}"


def _npm_install(package: str, version: str, folder: str, *, scripts: bool = False) -> str:
    """Idempotent `npm install` of one pinned package into its own folder (skipped when the marker
    names the same package). Node and npm come from the image; without them it says so. Install
    scripts are off unless the package needs them to fetch its platform binary. Node also trusts
    the image's CA bundle (as curl and pip do), so a TLS-inspecting proxy the image trusts works."""
    flags = "--no-audit --no-fund --no-update-notifier --omit=dev" + ("" if scripts else " --ignore-scripts")
    return (
        f'V="{folder}"; R="{package}@{version}"; '
        'test "$(cat "$V/.installed" 2>/dev/null)" = "$R" || { '
        'command -v npm >/dev/null || { echo "this agent needs node >= 20 and npm in the image" >&2; exit 127; }; '
        'C=/etc/ssl/certs/ca-certificates.crt; [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$C" ] && export NODE_EXTRA_CA_CERTS="$C"; '
        f'rm -rf "$V" && mkdir -p "$V" && npm install --prefix "$V" {flags} "$R" '
        '&& printf "%s\\n" "$R" > "$V/.installed"; }'
    )


NODE_ADDRESS_SPACE_BYTES = 64 * 1024**3
"""The address space a node agent's processes get (`AgentSpec.memory_bytes`): node aborts under the
terminal environment's 1 GiB per-process limit (V8 and WebAssembly reserve GiBs of virtual memory
up front: about 10 GiB for each WebAssembly instance, and Pi makes several: undici's HTTP parser
in node and in its own undici, its image library; with 16 GiB its model calls fail with
"Connection error."); what it really uses stays bounded by the session's cgroup."""

PI_VERSION = "0.73.1"
_PI_DIR = _npm_folder("pi-coding-agent", PI_VERSION)
_PI_SETTINGS = '{"retry": {"enabled": false, "provider": {"maxRetries": 0}}}\n'
"""Pi's own retries off: a refused call (401 wrong key, 410 closed rollout) ends the run at once
(otherwise 3 agent-level retries with 2-8 s back-off, and the SDK's own)."""


def _pi(api: str, base_url: str, name: str) -> AgentSpec:
    provider = {
        "baseUrl": base_url,
        "api": api,
        "apiKey": "{api_key_env}",  # pi reads the key from the variable of that name
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "{model}", "reasoning": False, "input": ["text"], "contextWindow": 32768, "maxTokens": 4096}],
    }
    models = json.dumps({"providers": {"openenv": provider}}, indent=2) + "\n"
    return AgentSpec(
        name=name,
        install=_npm_install("@mariozechner/pi-coding-agent", PI_VERSION, _PI_DIR),
        run=f'cd {{workdir}} && "{_PI_DIR}/node_modules/.bin/pi" -p --no-session --provider openenv --model {{model}} "$(cat {{task_file}})" < /dev/null',
        env={"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0", "NO_COLOR": "1"},
        config_path=".pi/agent/models.json",
        config=models,
        files={".pi/agent/settings.json": _PI_SETTINGS},
        install_timeout_s=600.0,
        install_allow=_NPM,
        memory_bytes=NODE_ADDRESS_SPACE_BYTES,
    )


PI = _pi("openai-completions", "{base_url}", "pi")
"""Pi (`@mariozechner/pi-coding-agent`), print mode (`pi -p`), OpenAI chat completions (streamed).

Tools it offers: `read`, `bash` (`{"command": ...}`), `edit`, `write`; it runs them itself in the
working directory and exits 0 after an answer without tool calls. Its provider is `openenv` in
`~/.pi/agent/models.json` (the key read from the variable `api_key_env` names)."""

PI_RESPONSES = _pi("openai-responses", "{base_url}", "pi-responses")
"""Pi speaking the OpenAI Responses API (streamed)."""

PI_ANTHROPIC = _pi("anthropic-messages", "{anthropic_base_url}", "pi-anthropic")
"""Pi speaking Anthropic Messages (streamed)."""


CLAUDE_CODE_VERSION = "2.1.332"
_CC_DIR = _npm_folder("claude-code", CLAUDE_CODE_VERSION)

CLAUDE_CODE = AgentSpec(
    name="claude-code",
    # Its postinstall puts the platform's native binary (from an optional dependency) in place.
    install=_npm_install("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, _CC_DIR, scripts=True),
    run=(
        f'cd {{workdir}} && "{_CC_DIR}/node_modules/.bin/claude" -p --dangerously-skip-permissions '
        '--output-format text "$(cat {task_file})" < /dev/null'
    ),
    env={
        "ANTHROPIC_BASE_URL": "{anthropic_base_url}",
        "ANTHROPIC_MODEL": "{model}",
        "ANTHROPIC_SMALL_FAST_MODEL": "{model}",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "{model}",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",
        "NO_COLOR": "1",
    },
    api_key_env="ANTHROPIC_API_KEY",
    base_url_env=None,
    install_timeout_s=600.0,
    install_allow=_NPM,
    memory_bytes=NODE_ADDRESS_SPACE_BYTES,
)
"""Claude Code (`@anthropic-ai/claude-code`, a native binary from npm), print mode (`claude -p`),
Anthropic Messages (streamed), permissions skipped (the sandbox is the boundary; `IS_SANDBOX=1`
says so). The key goes as `x-api-key` (`ANTHROPIC_API_KEY`). Tools it offers include `Bash`
(`{"command", "description"}`), `Read`, `Edit`, `Write`; its non-essential traffic (telemetry,
updates, error reports) is off, and every model it would use is the policy."""


CODEX_VERSION = "0.171.0"
_CODEX_DIR = _npm_folder("codex", CODEX_VERSION)

_CODEX_CONFIG = """\
# openenv: Codex CLI against the trainer's endpoint (OpenAI Responses API), nothing else.
model = "{model}"
model_provider = "openenv"
web_search = "disabled"

[model_providers.openenv]
name = "openenv"
base_url = "{base_url}"
env_key = "{api_key_env}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[agents]
enabled = false

[features]
goals = false
"""

CODEX = AgentSpec(
    name="codex",
    # The native binary comes as an optional dependency of the pinned version (no install script).
    install=_npm_install("@openai/codex", CODEX_VERSION, _CODEX_DIR),
    run=(
        f'cd {{workdir}} && "{_CODEX_DIR}/node_modules/.bin/codex" exec --skip-git-repo-check '
        '--dangerously-bypass-approvals-and-sandbox --ephemeral --color never "$(cat {task_file})" < /dev/null'
    ),
    env={"NO_COLOR": "1"},
    base_url_env=None,
    config_path=".codex/config.toml",
    config=_CODEX_CONFIG,
    install_timeout_s=600.0,
    install_allow=_NPM,
    memory_bytes=NODE_ADDRESS_SPACE_BYTES,
)
"""Codex CLI (`@openai/codex`, a native binary from npm), `codex exec`, the OpenAI Responses API
(streamed, stateless: `store: false`, the whole conversation each call). Its own sandbox and
approvals are bypassed (the episode's sandbox is the boundary); web search, sub-agents and goals
are off (hosted or namespaced tools the policy cannot be trained to call here). Its shell tool is
`exec_command` (`{"cmd": ...}`); it exits 0 after an answer without tool calls."""


OPENCODE_VERSION = "1.18.33"
_OPENCODE_DIR = _npm_folder("opencode", OPENCODE_VERSION)

_OPENCODE_CONFIG = json.dumps(
    {
        "$schema": "https://opencode.ai/config.json",
        "model": "openenv/{model}",
        "small_model": "openenv/{model}",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "openenv": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "openenv",
                "options": {"baseURL": "{base_url}", "apiKey": "{env:{api_key_env}}"},
                "models": {"{model}": {"name": "{model}", "limit": {"context": 32768, "output": 4096}}},
            }
        },
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
    },
    indent=2,
)

OPENCODE = AgentSpec(
    name="opencode",
    # Its postinstall links the platform's native binary (an optional dependency).
    install=_npm_install("opencode-ai", OPENCODE_VERSION, _OPENCODE_DIR, scripts=True),
    run=(
        f'cd {{workdir}} && "{_OPENCODE_DIR}/node_modules/.bin/opencode" run --pure --title openenv '
        '"$(cat {task_file})" < /dev/null'
    ),
    env={
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "NO_COLOR": "1",
    },
    base_url_env=None,
    config_path=".config/opencode/opencode.json",
    config=_OPENCODE_CONFIG,
    install_timeout_s=600.0,
    install_allow=_NPM,
    memory_bytes=NODE_ADDRESS_SPACE_BYTES,
)
"""OpenCode (`opencode-ai`, a native binary from npm), `opencode run`, OpenAI chat completions
(streamed) through its bundled `@ai-sdk/openai-compatible` provider. `--pure` (no external
plugins fetched), `--title` (no title-generation call), no model-list fetch, no updates; edits
and bash allowed without asking. Its shell tool is `bash` (`{"command", "description"}`).

A refused call (401, 404, 410) ends the run at once, unless the error's text matches what
OpenCode takes for a transient failure (`/429|500|502|503|504|524/`, "rate limit", "overloaded",
"timeout", ...): then it retries up to 5 times with back-off from 2 s (about a minute), whatever
the status or `x-should-retry`, and no setting turns that off. So a server in front of it must
keep such text (a random id, a byte count) out of refusals that will not change."""


# --- Terminus-2, from harbor on PyPI ------------------------------------------------------------

HARBOR_VERSION = "0.25.0"
_HARBOR_REQUIREMENTS = (f"harbor=={HARBOR_VERSION}", "litellm==1.110.2")
"""harbor pinned, and the litellm it was verified with (harbor does not pin it)."""

_TERMINUS_DIR = f"${{OPENENV_AGENTS_DIR:-/tmp/openenv-agents}}/harbor-{HARBOR_VERSION}"

_TERMINUS_INSTALL = (
    f'V="{_TERMINUS_DIR}"; R="{" ".join(_HARBOR_REQUIREMENTS)}"; '
    'test "$(cat "$V/.installed" 2>/dev/null)" = "$R" || { '
    # harbor needs Python >= 3.12: the image's (on PATH, or pyenv's), 3.12 first.
    'P=""; for c in "${OPENENV_PYTHON312:-}" $(command -v python3.12 python3.13 python3.14 2>/dev/null) '
    '"${PYENV_ROOT:-/root/.pyenv}"/versions/3.1[2-9]*/bin/python3.1[2-9]; do '
    '[ -n "$c" ] && [ -x "$c" ] && "$c" -c "import sys, venv; sys.exit(sys.version_info < (3, 12))" 2>/dev/null && { P="$c"; break; }; done; '
    '[ -n "$P" ] || { echo "Terminus-2 (harbor) needs Python >= 3.12 in the image (python3.12 on PATH, or OPENENV_PYTHON312)" >&2; exit 127; }; '
    'rm -rf "$V" && mkdir -p "$V" && B=$("$P" -c "import sys; print(sys.base_prefix)") && '
    # A Python outside /usr (pyenv's under /root) is not visible in the sandbox: copy its runtime
    # next to the venv (its libpython found through LD_LIBRARY_PATH, not its RUNPATH under /root).
    'if [ "${B#/usr}" = "$B" ]; then cp -a "$B" "$V/python" && rm -rf "$V"/python/lib/python3.*/test "$V"/python/lib/python3.*/site-packages/* '
    '&& P="$V/python/bin/$(basename "$P")"; fi && '
    'LD_LIBRARY_PATH="$V/python/lib" "$P" -m venv "$V/venv" && LD_LIBRARY_PATH="$V/python/lib" "$V/venv/bin/pip" install -q --disable-pip-version-check '
    + " ".join(f'"{r}"' for r in _HARBOR_REQUIREMENTS)
    + ' && printf "%s\\n" "$R" > "$V/.installed"; }'
)
"""Idempotent (the marker names the requirements); about 100 s cold, 0.6 GB with the copied runtime."""

TERMINUS_2 = AgentSpec(
    name="terminus-2",
    install=_TERMINUS_INSTALL,
    files={".openenv/terminus.py": (Path(__file__).parent / "terminus.py").read_text(encoding="utf-8")},
    run=(
        f'cd {{workdir}} && LD_LIBRARY_PATH="{_TERMINUS_DIR}/python/lib" "{_TERMINUS_DIR}/venv/bin/python" -I '
        '"$HOME/.openenv/terminus.py" --task-file {task_file} --workdir {workdir} < /dev/null'
    ),
    env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"},
    install_timeout_s=900.0,
    install_allow=_PYPI,
)
"""Terminus-2 (harbor's terminal agent, `harbor` on PyPI), its loop and its tmux both in the
sandbox (`openenv_sdk/agents/terminus.py`), OpenAI chat completions (not streamed, no tools):
each answer is Terminus's JSON (`analysis`, `plan`, `commands: [{"keystrokes", "duration"}]`,
`task_complete`); the run ends after `task_complete` is answered twice (harbor asks to confirm).
Needs Python >= 3.12 and tmux in the image."""
