"""A reward-hacking monitor: per-episode signals computed host-side from what the SDK already sees.

- `Episode` / `ToolCall`: an episode as the monitor reads it (`Episode.from_messages` takes the
  chat transcript `openenv eval` records and the trainers keep).
- `SIGNALS`: the transcript signals (grader paths, test or config writes, git traps, grade
  forgery, process escapes, network attempts, the sandbox's refusals), one function each.
- Evidence hooks (`register_evidence`, `evidence_for`, `default_evidence`): did the transcript do
  what the task needs? A reward at the pass threshold without it is the `reward_without_evidence` signal.
- `Monitor`: runs them all; `EpisodeFlags` per episode; `step_metrics` gives the trainer's
  `hacking/...` metrics for a step's episodes. `scan_records` flags a run's `episodes.jsonl`.
"""

from ._evidence import EvidenceHook, default_evidence, evidence_for, register_evidence
from ._monitor import EVIDENCE_SIGNAL, EpisodeFlags, Monitor, step_metrics
from ._records import scan_records
from ._signals import SIGNALS, Hit, Signal
from ._transcript import Episode, ToolCall, tool_calls_of

__all__ = [
    "EVIDENCE_SIGNAL",
    "SIGNALS",
    "Episode",
    "EpisodeFlags",
    "EvidenceHook",
    "Hit",
    "Monitor",
    "Signal",
    "ToolCall",
    "default_evidence",
    "evidence_for",
    "register_evidence",
    "scan_records",
    "step_metrics",
    "tool_calls_of",
]
