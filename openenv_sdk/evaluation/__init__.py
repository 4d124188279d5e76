"""Run a policy in an environment for many episodes: evaluation (`openenv eval`) and data
collection (`openenv collect`) share this package.

    policy = ChatPolicy(base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct")
    target = EnvTarget("environments/wordle")                # a folder, an image, or a URL
    result = asyncio.run(arun(target, policy, output="evals/wordle", num_tasks=20, rollouts=4))
    await target.stop()
    print(result.summary.mean_reward, result.summary.pass_at_k)

Each episode: `reset` with a task from the server's Task API, the first observation as the user
message, the policy's tool calls sent to the environment over MCP, then the host-side grader.
"""

from ..episode_config import DEFAULT_SYSTEM_PROMPT, EpisodeConfig
from ..loader import load_grader
from ..prompt import observation_text
from ._dataset import chat_messages, dataset_rows, save_dataset
from ._episode import openai_tools, play_episode, tool_result_text
from ._metrics import RunSummary, TaskSummary, default_ks, pass_at_k, summarize
from ._policy import ChatPolicy, Policy, PolicyTurn, ScriptedPolicy, TurnContext, load_policy
from ._profile import PROFILE_FILE, PassRateProfile, ProfileError, TaskPassRate, task_profile
from ._records import EpisodeLog, EpisodeRecord, PlannedEpisode, TurnTokens
from ._report import markdown_report
from ._run import EPISODES_FILE, REPORT_FILE, SUMMARY_FILE, OutputMismatch, RunResult, arun
from ._runner import RunConfig, run_episodes
from ._target import EnvTarget, plan_episodes

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "EPISODES_FILE",
    "PROFILE_FILE",
    "REPORT_FILE",
    "SUMMARY_FILE",
    "ChatPolicy",
    "EnvTarget",
    "EpisodeConfig",
    "EpisodeLog",
    "EpisodeRecord",
    "OutputMismatch",
    "PassRateProfile",
    "PlannedEpisode",
    "Policy",
    "PolicyTurn",
    "ProfileError",
    "RunConfig",
    "RunResult",
    "RunSummary",
    "ScriptedPolicy",
    "TaskPassRate",
    "TaskSummary",
    "TurnContext",
    "TurnTokens",
    "arun",
    "chat_messages",
    "dataset_rows",
    "default_ks",
    "load_grader",
    "load_policy",
    "markdown_report",
    "observation_text",
    "openai_tools",
    "pass_at_k",
    "plan_episodes",
    "play_episode",
    "run_episodes",
    "save_dataset",
    "summarize",
    "task_profile",
    "tool_result_text",
]
