"""`openenv eval ENV --base-url URL --model NAME`: run a policy for N episodes and grade them.

The episodes and their grading are `openenv_sdk.evaluation`'s (shared with `openenv collect`);
this module is the command's options and its output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..episode_config import MAX_TURNS
from ..evaluation import EPISODES_FILE, PROFILE_FILE, REPORT_FILE, SUMMARY_FILE, task_profile
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._rollouts import (
    ApiKeyOpt,
    BaseUrlOpt,
    ConcurrencyOpt,
    EnvArg,
    EnvTimeoutOpt,
    EnvTokenOpt,
    EpisodeTimeoutOpt,
    GraderOpt,
    KeepStateOpt,
    MaxStateBytesOpt,
    MaxTokensOpt,
    MaxTurnsOpt,
    ModelOpt,
    NumTasksOpt,
    OutputOpt,
    OverwriteOpt,
    PassKOpt,
    PassThresholdOpt,
    PolicyOpt,
    RequestTimeoutOpt,
    RolloutOptions,
    RolloutsOpt,
    SplitOpt,
    StartupTimeoutOpt,
    SystemPromptOpt,
    TaskOpt,
    TemperatureOpt,
    default_output,
    exit_code,
    render_summary,
    run_rollouts,
)

__all__ = ["eval"]

ProfileOpt = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Also write OUTPUT/profile.json: each task's pass rate (passed / graded, at --pass-threshold), "
        "for a trainer's curriculum (openenv_trainers.mixture).",
    ),
]


def eval(
    env: EnvArg,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    policy: PolicyOpt = None,
    num_tasks: NumTasksOpt = None,
    rollouts: RolloutsOpt = 1,
    split: SplitOpt = None,
    task: TaskOpt = None,
    concurrency: ConcurrencyOpt = 8,
    max_turns: MaxTurnsOpt = MAX_TURNS,
    system_prompt: SystemPromptOpt = None,
    temperature: TemperatureOpt = None,
    max_tokens: MaxTokensOpt = None,
    pass_threshold: PassThresholdOpt = 1.0,
    pass_k: PassKOpt = None,
    grader: GraderOpt = None,
    env_token: EnvTokenOpt = None,
    output: OutputOpt = None,
    overwrite: OverwriteOpt = False,
    keep_state: KeepStateOpt = False,
    max_state_bytes: MaxStateBytesOpt = 4 * 1024 * 1024,
    profile: ProfileOpt = False,
    request_timeout_s: RequestTimeoutOpt = 300.0,
    episode_timeout_s: EpisodeTimeoutOpt = 900.0,
    env_timeout_s: EnvTimeoutOpt = 60.0,
    startup_timeout_s: StartupTimeoutOpt = 120.0,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Evaluate a policy on an environment: N tasks from its Task API, R episodes each, graded host-side.

    The policy is an OpenAI-compatible chat endpoint (vLLM, SGLang, a provider) that calls the
    environment's tools (their schemas come from the server), or a local function
    (--policy scripted:MODULE:FUNCTION). Prints the mean reward, pass@k (the unbiased
    estimator, over tasks) and a per-task table; writes episodes.jsonl, summary.json and
    report.md to --output (default evals/ENV/MODEL-TIME), and with --profile profile.json (each
    task's pass rate, which a training curriculum reads). Running again with the same --output
    resumes: episodes already there are not played again. Exit code: 0 every episode graded,
    1 an episode failed or the run could not start, 2 bad usage.

    Examples:
        openenv eval environments/wordle --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct -n 50 -r 4
        openenv eval environments/wordle --base-url https://api.openai.com/v1 --model gpt-4.1-mini --task 1000 --task 1001 -r 8 -k 1 -k 8
        openenv eval http://127.0.0.1:8001 --grader environments/wordle --policy scripted:my_policy:act --json
        openenv eval environments/wordle --base-url http://localhost:8000/v1 --model my-model --split train -r 8 --profile
    """
    fmt = resolve_format(output_format, json_flag)
    name = model or (policy or "policy")
    options = RolloutOptions(
        env=env, base_url=base_url, model=model, api_key=api_key, policy=policy, num_tasks=num_tasks,
        rollouts=rollouts, split=split, tasks=list(task or []), concurrency=concurrency, max_turns=max_turns,
        system_prompt=system_prompt, temperature=temperature, max_tokens=max_tokens, pass_threshold=pass_threshold,
        pass_k=list(pass_k or []), grader=grader, env_token=env_token, request_timeout_s=request_timeout_s,
        episode_timeout_s=episode_timeout_s, env_timeout_s=env_timeout_s, startup_timeout_s=startup_timeout_s,
        output=output if output is not None else default_output("evals", env, name), overwrite=overwrite,
        keep_state=keep_state, max_state_bytes=max_state_bytes,
    )  # fmt: skip
    result = run_rollouts(options, command="eval", fmt=fmt)
    out: Path = result.output
    files = [out / EPISODES_FILE, out / SUMMARY_FILE, out / REPORT_FILE]
    if profile:
        s = result.summary
        files.append(
            task_profile(result.records, env=s.env, model=s.model, pass_threshold=s.pass_threshold).write(out / PROFILE_FILE)
        )
    render_summary(result, fmt=fmt, files=files)
    raise typer.Exit(exit_code(result))
