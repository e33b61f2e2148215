"""Reads the scripted model server's answers with the official SDKs.

Usage: model_sdks.py BASE_URL
Makes four requests, in this order (the server's script has one reply for
each): OpenAI Chat Completions streamed, then whole; Anthropic Messages
streamed, then whole. Prints one JSON object with what each SDK parsed.
"""
import json
import sys

import anthropic
import openai

base = sys.argv[1]
tools_openai = [{"type": "function", "function": {"name": "mcp__demo__add", "description": "Adds",
                 "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]
tools_anthropic = [{"name": "mcp__demo__add", "description": "Adds",
                    "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]
messages = [{"role": "user", "content": "add 2 and 3"}]
out = {}

client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
text, calls, finish, usage = "", {}, None, None
for chunk in client.chat.completions.create(model="scripted", messages=messages, tools=tools_openai, stream=True,
                                            stream_options={"include_usage": True}):
    if chunk.usage:
        usage = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
    for choice in chunk.choices:
        text += choice.delta.content or ""
        for call in choice.delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] = call.id or entry["id"]
            if call.function:
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
        finish = choice.finish_reason or finish
out["openai_stream"] = {"text": text, "calls": [calls[i] for i in sorted(calls)], "finish": finish, "usage": usage}

whole = client.chat.completions.create(model="scripted", messages=messages, tools=tools_openai)
message = whole.choices[0].message
out["openai_whole"] = {
    "text": message.content,
    "calls": [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []],
    "finish": whole.choices[0].finish_reason,
    "usage": (whole.usage.prompt_tokens, whole.usage.completion_tokens),
}

client = anthropic.Anthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
def blocks(message):
    return [{"type": b.type, "text": getattr(b, "text", None), "id": getattr(b, "id", None),
             "name": getattr(b, "name", None), "input": getattr(b, "input", None)} for b in message.content]
with client.messages.stream(model="scripted", max_tokens=100, messages=messages, tools=tools_anthropic) as stream:
    final = stream.get_final_message()
out["anthropic_stream"] = {"blocks": blocks(final), "stop": final.stop_reason,
                           "usage": (final.usage.input_tokens, final.usage.output_tokens)}
final = client.messages.create(model="scripted", max_tokens=100, messages=messages, tools=tools_anthropic)
out["anthropic_whole"] = {"blocks": blocks(final), "stop": final.stop_reason,
                          "usage": (final.usage.input_tokens, final.usage.output_tokens)}
print(json.dumps(out))
