"""The tool-calling template, tool schemas, tool-call parsing and tool results."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from openenv_trainers.chat import (
    ToolCall,
    parse_assistant,
    tool_call_text,
    tool_chat_template,
    tool_result_text,
    tool_schemas,
    use_tool_chat_template,
)
from openenv_trainers.tiny_model import ECHO_TOOL


def test_the_template_is_trls_qwen2_5_and_trl_knows_its_response_format(tokenizer: Any) -> None:
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    assert tokenizer.chat_template == tool_chat_template()
    assert tokenizer.response_template is not None
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)


def test_a_tokenizer_without_chatml_tokens_is_refused() -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    bare = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
    with pytest.raises(ValueError, match=r"ChatML; this tokenizer has no \['<\|im_start\|>', '<\|im_end\|>'\]"):
        use_tool_chat_template(bare)


def test_tool_schemas_from_sdk_dicts_and_mcp_tools() -> None:
    from openenv_sdk.types import ToolSchema

    schema = ECHO_TOOL["function"]["parameters"]
    sdk = ToolSchema(name="echo", description="Return the message unchanged.", input_schema=schema)
    mcp_like = SimpleNamespace(name="echo", description="Return the message unchanged.", inputSchema=schema)
    as_dict = {"name": "echo", "description": "Return the message unchanged.", "inputSchema": schema}
    assert tool_schemas([sdk]) == tool_schemas([mcp_like]) == tool_schemas([as_dict]) == [ECHO_TOOL]


def _prompt(tokenizer: Any) -> list[int]:
    messages = [{"role": "user", "content": "echo two words"}]
    return tokenizer.apply_chat_template(messages, tools=[ECHO_TOOL], add_generation_prompt=True, return_dict=False)


def test_a_sampled_tool_call_parses_into_name_and_arguments(tokenizer: Any) -> None:
    ids = tokenizer(tool_call_text("echo", {"message": "two words"}) + "<|im_end|>", add_special_tokens=False)["input_ids"]
    message = parse_assistant(tokenizer, ids, prefix=_prompt(tokenizer), tools=[ECHO_TOOL])
    [call] = ToolCall.from_message(message)
    assert (call.name, call.arguments) == ("echo", {"message": "two words"})


def test_a_malformed_tool_call_is_plain_text_not_an_exception(tokenizer: Any) -> None:
    ids = tokenizer('<tool_call>\n{"name": "echo", "argu\n</tool_call><|im_end|>', add_special_tokens=False)["input_ids"]
    message = parse_assistant(tokenizer, ids, prefix=_prompt(tokenizer), tools=[ECHO_TOOL])
    assert ToolCall.from_message(message) == []
    assert message["role"] == "assistant" and "argu" in message["content"]


def test_tool_results_show_text_and_report_errors() -> None:
    from mcp import types

    ok = types.CallToolResult(content=[types.TextContent(type="text", text="hello")], is_error=False)
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="boom")], is_error=True)
    structured = types.CallToolResult(content=[], structured_content={"n": 1}, is_error=False)
    assert tool_result_text(ok) == ("hello", False)
    assert tool_result_text(failed) == ("boom", True)
    assert tool_result_text(structured) == ('{"n": 1}', False)
