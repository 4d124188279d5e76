"""`openenv collect ENV --base-url URL --model NAME -o OUT`: teacher rollouts to a dataset.

The episodes are `openenv_sdk.evaluation`'s (shared with `openenv eval`); this module adds the
dataset: `OUT/dataset` (a `datasets.Dataset`, `save_to_disk`), optionally pushed to the Hub.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..episode_config import MAX_TURNS
from ..evaluation import EPISODES_FILE, SUMMARY_FILE, save_dataset
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import debug_enabled, err_console, fail
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
    exit_code,
    render_summary,
    run_rollouts,
)

__all__ = ["collect"]

DATASET_DIR = "dataset"


def collect(
    env: EnvArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The output folder (resumed when it holds episodes).", show_default=False)],
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
    logprobs: Annotated[bool, typer.Option("--logprobs", help="Ask the endpoint for each sampled token's logprob.")] = False,
    token_ids: Annotated[
        bool, typer.Option("--token-ids", help="Ask the endpoint for token ids (vLLM's return_token_ids).")
    ] = False,
    min_reward: Annotated[
        float | None, typer.Option("--min-reward", help="Only episodes with at least this reward go into the dataset.")
    ] = None,
    push_to_hub: Annotated[
        str | None, typer.Option("--push-to-hub", help="Also push the dataset to this Hub repo (ORG/NAME).")
    ] = None,
    private: Annotated[bool, typer.Option("--private", help="With --push-to-hub: a private dataset repo.")] = False,
    pass_threshold: PassThresholdOpt = 1.0,
    pass_k: PassKOpt = None,
    grader: GraderOpt = None,
    env_token: EnvTokenOpt = None,
    overwrite: OverwriteOpt = False,
    keep_state: KeepStateOpt = False,
    max_state_bytes: MaxStateBytesOpt = 4 * 1024 * 1024,
    request_timeout_s: RequestTimeoutOpt = 300.0,
    episode_timeout_s: EpisodeTimeoutOpt = 900.0,
    env_timeout_s: EnvTimeoutOpt = 60.0,
    startup_timeout_s: StartupTimeoutOpt = 120.0,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Collect rollouts of a teacher policy as a dataset (for an SFT warm-up, or offline RL).

    Plays N tasks × R episodes as `openenv eval` does (the same options) and writes
    OUT/episodes.jsonl (messages, tool calls, rewards, task ids; each episode as it ends),
    OUT/summary.json, and OUT/dataset (a `datasets.Dataset`, load_from_disk; needs
    `pip install 'openenv-sdk[datasets]'`). Token ids and logprobs are kept when the policy
    gives them: a scripted policy returning them, or --logprobs/--token-ids against a server
    that returns them (vLLM). Running again with the same -o skips the episodes already there.

    Examples:
        openenv collect environments/wordle --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-72B-Instruct -n 1000 -o data/wordle-sft --min-reward 1
        openenv collect environments/wordle --policy scripted:teacher:act -n 200 -r 2 -o data/wordle --push-to-hub me/wordle-sft
        openenv collect environments/wordle --base-url http://gpu:8000/v1 --model my-model --logprobs --token-ids -o data/wordle-rl
    """
    fmt = resolve_format(output_format, json_flag)
    options = RolloutOptions(
        env=env, base_url=base_url, model=model, api_key=api_key, policy=policy, num_tasks=num_tasks,
        rollouts=rollouts, split=split, tasks=list(task or []), concurrency=concurrency, max_turns=max_turns,
        system_prompt=system_prompt, temperature=temperature, max_tokens=max_tokens, pass_threshold=pass_threshold,
        pass_k=list(pass_k or []), grader=grader, env_token=env_token, request_timeout_s=request_timeout_s,
        episode_timeout_s=episode_timeout_s, env_timeout_s=env_timeout_s, startup_timeout_s=startup_timeout_s,
        output=output, overwrite=overwrite, logprobs=logprobs, token_ids=token_ids,
        keep_state=keep_state, max_state_bytes=max_state_bytes,
        extra={"min_reward": min_reward, "push_to_hub": push_to_hub},
    )  # fmt: skip
    result = run_rollouts(options, command="collect", fmt=fmt)
    folder = output / DATASET_DIR
    try:
        dataset = save_dataset(result.records, folder, min_reward=min_reward)
    except ImportError as e:
        fail(str(e), hint=f"The episodes are in {output / EPISODES_FILE}", code=1)
        raise
    if fmt is OutputFormat.human:
        err_console.print(f"dataset: {len(dataset)} row(s) in {folder}")
    if push_to_hub is not None:
        try:
            dataset.push_to_hub(push_to_hub, private=private)
        except Exception as e:  # the Hub's errors are many; the dataset on disk stays
            if debug_enabled():
                raise
            fail(f"push to {push_to_hub} failed: {type(e).__name__}: {e}", hint=f"The dataset is saved in {folder}", code=1)
    render_summary(result, fmt=fmt, files=[output / EPISODES_FILE, output / SUMMARY_FILE, folder])
    raise typer.Exit(exit_code(result))
