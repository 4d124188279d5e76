"""A test agent (standard library only) that writes its requests the way real agents vary them.

It asks the model to call `echo` (the tiny model was taught that conversation), runs each call
itself, and sends the result back, for at most `--max-calls` model calls. Its messages use the
shapes a trainer must normalize: user content as a list of text parts, assistant tool calls
sent back with JSON-string arguments and call ids, tool results linked only by `tool_call_id`.
With `--hang-after N` it stops answering after N model calls and sleeps (a hung agent).
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

ECHO_TOOL = json.loads(os.environ["ECHO_TOOL_JSON"])


def chat(body):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--text", default="hello sandbox")
    parser.add_argument("--max-calls", type=int, default=3)
    parser.add_argument("--hang-after", type=int, default=0)
    args = parser.parse_args()
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": [{"type": "text", "text": "Call the echo tool with the exact text: "}, {"type": "text", "text": args.text}]},
    ]
    for call_number in range(1, args.max_calls + 1):
        try:
            answer = chat({"model": os.environ.get("OPENENV_MODEL", "policy"), "messages": messages, "tools": [ECHO_TOOL]})
        except urllib.error.HTTPError as e:
            print(f"model API error {e.code}: {e.read().decode()[:300]}", file=sys.stderr)
            return 3
        message = answer["choices"][0]["message"]
        print(f"call {call_number}: {json.dumps(message)[:200]}", flush=True)
        messages.append(message)  # sent back as received: string arguments, call ids, null content
        calls = message.get("tool_calls") or []
        if args.hang_after and call_number >= args.hang_after:
            time.sleep(3600)
        if not calls:
            return 0
        for call in calls:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            result = arguments.get("message", "") if isinstance(arguments, dict) else ""
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
