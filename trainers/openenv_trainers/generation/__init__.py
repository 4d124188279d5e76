"""Generation backends: in-process transformers, and a client of OpenAI-compatible completions servers (vLLM)."""

from .base import (
    LOGPROBS_MODES,
    Completion,
    GenerationBackend,
    SamplingParams,
    check_completion,
)
from .client import CompletionsClient
from .transformers_backend import TransformersBackend

__all__ = [
    "LOGPROBS_MODES",
    "Completion",
    "CompletionsClient",
    "GenerationBackend",
    "SamplingParams",
    "TransformersBackend",
    "check_completion",
]
