"""What `openenv eval` and `openenv collect` share: their options, the progress bar, the run.

Exit codes: 0 every episode was graded, 1 an episode failed (its record holds the error) or
the run could not start (the policy or the environment unreachable), 2 bad usage.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import OpenEnvError
from ..evaluation import (
    DEFAULT_SYSTEM_PROMPT,
    ChatPolicy,
    EnvTarget,
    EpisodeConfig,
    EpisodeRecord,
    OutputMismatch,
    Policy,
    RunConfig,
    RunResult,
    arun,
    load_policy,
)
from ._options import OutputFormat
from ._output import console, debug_enabled, err_console, fail, print_json

__all__ = ["EnvArg", "RolloutOptions", "default_output", "exit_code", "render_summary", "run_rollouts"]

# --- options (each command's signature lists them; these are their types) ---------------------

EnvArg = Annotated[
    str, typer.Argument(help="The environment: a folder (holds openenv.yaml), a server URL, or an image.", show_default=False)
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", envvar="OPENAI_BASE_URL", help="The policy's OpenAI-compatible API root, e.g. http://localhost:8000/v1."),
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="The model id sent to --base-url.")]
ApiKeyOpt = Annotated[
    str | None, typer.Option("--api-key", envvar="OPENAI_API_KEY", help="Sent as Authorization: Bearer.", show_default=False)
]
PolicyOpt = Annotated[
    str | None,
    typer.Option("--policy", help="A local policy instead of --base-url: scripted:MODULE:FUNCTION (MODULE a module or a .py file)."),
]
NumTasksOpt = Annotated[int | None, typer.Option("--num-tasks", "-n", min=1, help="How many tasks (the split's first N); default all.")]
RolloutsOpt = Annotated[int, typer.Option("--rollouts", "-r", min=1, help="Episodes per task (pass@k needs k of them).")]
SplitOpt = Annotated[str | None, typer.Option("--split", help="The Task API split to take tasks from.")]
TaskOpt = Annotated[list[str] | None, typer.Option("--task", "-t", help="A task id (repeat for several), instead of --split.")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Episodes (sessions) at a time.")]
MaxTurnsOpt = Annotated[int, typer.Option("--max-turns", min=1, help="The most assistant turns per episode.")]
SystemPromptOpt = Annotated[str | None, typer.Option("--system-prompt", help="The system message (default: a short agent prompt).")]
TemperatureOpt = Annotated[float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature (the server's default when unset).")]
MaxTokensOpt = Annotated[int | None, typer.Option("--max-tokens", min=1, help="The most tokens per assistant turn.")]
PassThresholdOpt = Annotated[float, typer.Option("--pass-threshold", help="An episode passes when its reward is at least this.")]
PassKOpt = Annotated[list[int] | None, typer.Option("--pass-k", "-k", min=1, help="A k of pass@k (repeat); default 1, powers of 2, and --rollouts.")]
GraderOpt = Annotated[
    str | None, typer.Option("--grader", help="The grader: an environment folder or module:attribute (needed for a URL or image).")
]
EnvTokenOpt = Annotated[
    str | None,
    typer.Option("--env-token", envvar="OPENENV_ORCHESTRATOR_TOKEN", help="A URL's orchestrator token.", show_default=False),
]
RequestTimeoutOpt = Annotated[float, typer.Option("--request-timeout-s", min=0.1, help="The longest wait for one policy answer, in seconds.")]
EpisodeTimeoutOpt = Annotated[float, typer.Option("--episode-timeout-s", min=0.1, help="The longest one episode may take, grading included, in seconds.")]
EnvTimeoutOpt = Annotated[float, typer.Option("--env-timeout-s", min=0.1, help="The longest wait for one environment reply, in seconds.")]
StartupTimeoutOpt = Annotated[float, typer.Option("--startup-timeout-s", min=0.1, help="The longest wait for a folder's or image's server, in seconds.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="The output folder; default evals/ENV/MODEL-TIME.", show_default=False)
]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Start the output's episodes afresh instead of resuming.")]
KeepStateOpt = Annotated[
    bool,
    typer.Option(
        "--keep-state",
        help="Keep each episode's final state and workspace archive in OUTPUT/state/, for `openenv regrade`.",
    ),
]
MaxStateBytesOpt = Annotated[
    int,
    typer.Option(
        "--max-state-bytes", min=1024, max=6 * 1024 * 1024,
        help="With --keep-state: the largest workspace archive kept (compressed, bytes; at most 6 MiB, so that "
        "regrading can send it back within one 8 MiB server message); a larger one is not kept.",
    ),
]  # fmt: skip

_USAGE = "Example: openenv eval environments/wordle --base-url http://localhost:8000/v1 --model my-model -n 20 -r 4"


@dataclass(kw_only=True)
class RolloutOptions:
    """Every option of a run, as the command received them."""

    env: str
    base_url: str | None
    model: str | None
    api_key: str | None
    policy: str | None
    num_tasks: int | None
    rollouts: int
    split: str | None
    tasks: list[str]
    concurrency: int
    max_turns: int
    system_prompt: str | None
    temperature: float | None
    max_tokens: int | None
    pass_threshold: float
    pass_k: list[int]
    grader: str | None
    env_token: str | None
    request_timeout_s: float
    episode_timeout_s: float
    env_timeout_s: float
    startup_timeout_s: float
    output: Path
    overwrite: bool
    logprobs: bool = False
    token_ids: bool = False
    keep_state: bool = False
    max_state_bytes: int = 4 * 1024 * 1024
    extra: dict[str, Any] = field(default_factory=dict)

    def recorded(self) -> dict[str, Any]:
        """The options as the summary records them (never the keys)."""
        skip = {"api_key", "env_token", "extra"}
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self).items() if k not in skip} | self.extra


def default_output(root: str, env: str, model: str) -> Path:
    """`root/ENV/MODEL-YYYYmmdd-HHMMSS`, names made safe for a path."""
    from datetime import datetime

    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "x"

    env_name = Path(env).resolve().name if Path(env).is_dir() else env
    return Path(root) / slug(env_name) / f"{slug(model)}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _make_policy(o: RolloutOptions) -> tuple[Policy, str]:
    """The policy and the model name recorded with each episode; usage errors exit 2."""
    if o.policy is not None:
        if o.base_url is not None and o.model is not None:
            fail("give --policy or --base-url/--model, not both", hint=_USAGE, code=2)
        try:
            policy = load_policy(o.policy)
        except ValueError as e:
            fail(str(e), hint="e.g. --policy scripted:my_policy:act (a function (messages, tools) -> message)", code=2)
            raise
        return policy, policy.name
    if o.base_url is None or o.model is None:
        fail("the policy needs --base-url and --model (or --policy scripted:MODULE:FUNCTION)", hint=_USAGE, code=2)
        raise AssertionError  # fail() exits
    if not o.base_url.startswith(("http://", "https://")):
        fail(f"--base-url must be an http(s) URL, got {o.base_url!r}", hint=_USAGE, code=2)
    params: dict[str, Any] = {}
    if o.temperature is not None:
        params["temperature"] = o.temperature
    if o.max_tokens is not None:
        params["max_tokens"] = o.max_tokens
    chat = ChatPolicy(
        base_url=o.base_url, model=o.model, api_key=o.api_key, params=params, logprobs=o.logprobs,
        token_ids=o.token_ids, timeout_s=o.request_timeout_s,
    )  # fmt: skip
    return chat, o.model


class _Progress:
    """The progress bar (stderr), with the running mean reward, failed episodes and failed tool calls."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.rewards: list[float] = []
        self.errors = 0
        self.tool_errors = 0
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]episodes"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=err_console,
            disable=not enabled,
        )
        self.task: Any = None

    def plan(self, todo: int, resumed: int, skipped_lines: int = 0) -> None:
        if (resumed or skipped_lines) and self.enabled:
            skipped = f" ({skipped_lines} damaged line(s) skipped: their episodes run again)" if skipped_lines else ""
            err_console.print(f"resuming: {resumed} episode(s) already in the output, {todo} to run{skipped}")
        self.task = self.bar.add_task("episodes", total=todo, status="")

    def record(self, record: EpisodeRecord) -> None:
        if record.error is not None:
            self.errors += 1
        elif record.reward is not None:
            self.rewards.append(record.reward)
        self.tool_errors += record.tool_errors
        mean = f"mean reward {sum(self.rewards) / len(self.rewards):.3f}" if self.rewards else "mean reward -"
        status = f"{mean} · {self.errors} failed episode(s) · {self.tool_errors} failed tool call(s)"
        self.bar.update(self.task, advance=1, status=status)


def _keeper(o: RolloutOptions) -> Any:
    """The `StateKeeper` of --keep-state (None without it); folders are recorded absolute, so
    that `openenv regrade` finds them from anywhere."""
    if not o.keep_state:
        return None
    from ..regrade import StateKeeper, StateStore

    def where(spec: str | None) -> str | None:
        return str(Path(spec).resolve()) if spec is not None and Path(spec).is_dir() else spec

    return StateKeeper(StateStore(o.output), env=where(o.env) or o.env, grader=where(o.grader),
                       max_archive_bytes=o.max_state_bytes)  # fmt: skip


def run_rollouts(o: RolloutOptions, *, command: str, fmt: OutputFormat) -> RunResult:
    """Check the options, run the episodes with a progress bar, and return the result.

    Usage errors exit 2; an environment or policy that cannot be reached exits 1 with one line.
    """
    if o.pass_k and max(o.pass_k) > o.rollouts:
        fail(f"pass@{max(o.pass_k)} needs at least {max(o.pass_k)} rollouts per task: raise --rollouts (-r)", code=2)
    if o.tasks and o.split is not None:
        fail("give --task or --split, not both", code=2)
    policy, model = _make_policy(o)
    try:
        target = EnvTarget(
            o.env, grader=o.grader, orchestrator_token=o.env_token, startup_timeout_s=o.startup_timeout_s,
            timeout_s=o.env_timeout_s,
        )  # fmt: skip
    except (OpenEnvError, ValueError, ImportError) as e:
        fail(str(e), hint="ENV is an environment folder, a server URL (http://...) or an image name", code=2)
        raise
    episode = EpisodeConfig(
        system_prompt=o.system_prompt if o.system_prompt is not None else DEFAULT_SYSTEM_PROMPT,
        max_turns=o.max_turns,
        pass_threshold=o.pass_threshold,
    )
    run = RunConfig(concurrency=o.concurrency, episode_timeout_s=o.episode_timeout_s, keep=_keeper(o))
    progress = _Progress(enabled=fmt is OutputFormat.human)
    if fmt is OutputFormat.human:
        err_console.print(
            f"[bold]openenv {command}[/] {escape(o.env)} · policy {escape(policy.name)}"
            + (f" @ {escape(o.base_url)}" if o.base_url and o.policy is None else "")
        )

    async def main() -> RunResult:
        try:
            if isinstance(policy, ChatPolicy):
                await policy.check(timeout_s=min(o.request_timeout_s, 30.0))
            with progress.bar:
                return await arun(
                    target, policy, output=o.output, command=command, model=model, split=o.split,
                    default_split="test" if command == "eval" else "train", task_ids=o.tasks,
                    num_tasks=o.num_tasks, rollouts=o.rollouts, ks=o.pass_k or None, episode=episode, run=run,
                    resume=not o.overwrite, config=o.recorded(), on_plan=progress.plan, on_record=progress.record,
                )  # fmt: skip
        finally:
            await policy.aclose()
            await target.stop()

    try:
        return asyncio.run(main())
    except OutputMismatch as e:
        fail(str(e), code=2)
    except (OpenEnvError, ValueError, OSError) as e:
        if debug_enabled():
            raise
        if isinstance(policy, ChatPolicy) and policy.base_url in str(e):
            fail(f"cannot reach the policy: {e}",
                 hint="Check --base-url: the API root that serves /chat/completions (e.g. http://localhost:8000/v1)")  # fmt: skip
        fail(f"the run could not start: {e}", hint="Run again with OPENENV_DEBUG=1 for the traceback")
    raise AssertionError("unreachable")


def render_summary(result: RunResult, *, fmt: OutputFormat, files: list[Path]) -> None:
    """Print the numbers (human), the summary (json), or nothing (quiet)."""
    s = result.summary
    if fmt is OutputFormat.json:
        print_json(s.model_dump(mode="json") | {"files": [str(f) for f in files]})
        return
    if fmt is OutputFormat.quiet:
        return

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    console.print(
        f"[bold]mean reward[/] {num(s.mean_reward)} (std {num(s.std_reward)}) over {s.graded} graded episode(s)"
        + (f", [bold red]{s.errors} failed episode(s)[/]" if s.errors else ", no failed episode")
        + (f", [bold red]{s.tool_errors} of {s.tool_calls} tool call(s) failed[/]" if s.tool_errors
           else f", no failed tool call ({s.tool_calls} made)")
        + (f"; {s.resumed} resumed" if s.resumed else "")
        + (f"; {s.skipped_lines} damaged line(s) of the output skipped, their episodes played again" if s.skipped_lines else "")
    )
    console.print(
        "   ".join(f"[bold]pass@{k}[/] {num(v)}" for k, v in s.pass_at_k.items())
        + f"   [dim](passed: reward ≥ {s.pass_threshold:g}; {s.tasks} task(s) × {s.rollouts_per_task})[/]"
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("task", "graded", "passed", "errors", "tool errors", "mean reward", *(f"pass@{k}" for k in s.pass_at_k))
    for column in columns:
        table.add_column(column, justify="left" if column == "task" else "right")
    for t in s.per_task:
        table.add_row(escape(t.task_id), str(t.graded), str(t.passed), str(t.errors), str(t.tool_errors),
                      num(t.mean_reward),
                      *(num(v) for v in t.pass_at_k.values()))  # fmt: skip
    console.print(table)
    if s.failures_by_cause or s.policy_timeouts:  # docs/failures.md: failures are never rewards
        console.print(
            "[bold]failures (no reward)[/] " + (", ".join(f"{c} {n}" for c, n in s.failures_by_cause.items()) or "none")
            + f"; policy timeouts (graded) {s.policy_timeouts}"
        )
    for what, causes in (("failed episodes", s.errors_by_cause), ("failed tool calls", s.tool_errors_by_cause)):
        if causes:
            console.print(f"[bold red]{what} by cause[/]")
            for cause, n in list(causes.items())[:10]:
                console.print(f"  {n:>6}  {escape(cause)}")
            if len(causes) > 10:
                console.print(f"  ... {len(causes) - 10} more cause(s) in summary.json")
    errors = [r for r in result.records if r.error is not None]
    for record in errors[:5]:
        console.print(f"[red]error[/] {escape(record.key)}: {escape(record.error or '')}")
    if len(errors) > 5:
        console.print(f"[red]... {len(errors) - 5} more error(s)[/] in {escape(str(files[0]))}")
    console.print("wrote " + ", ".join(escape(str(f)) for f in files))


def exit_code(result: RunResult) -> int:
    return 1 if result.summary.errors else 0
