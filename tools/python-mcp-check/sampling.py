"""By hand: the Python `mcp` 2.x client against reasoning-ledger, sampling answered by
the client (no HTTP provider configured), in both protocol generations.

    python3 -m venv /tmp/mcp-venv && /tmp/mcp-venv/bin/pip install "mcp>=2"
    cargo build
    /tmp/mcp-venv/bin/python tools/python-mcp-check/sampling.py target/debug/reasoning-ledger auto
    /tmp/mcp-venv/bin/python tools/python-mcp-check/sampling.py target/debug/reasoning-ledger legacy

`auto` tries `server/discover` first (2026-07-28: the tools answer "input required" and
the client calls them again with its model's answer); `legacy` uses `initialize` (the
server sends `sampling/createMessage`). Prints the answers, the recorded event types and
how each model call was reached.
"""

import asyncio
import json
import os
import sys
import tempfile

import mcp_types as types
from mcp import StdioServerParameters
from mcp.client.client import Client

BIN, MODE = sys.argv[1], sys.argv[2]
calls = []


async def sampling(context, params):
    calls.append(params)
    text = "[Analysis]\nthe client's model thinks\n\n[Final Conclusion]\nPython sampled this.\nConfidence: 80%"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=text),
        model="python-client-model",
        stop_reason="endTurn",
    )


async def main():
    data = tempfile.mkdtemp()
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.endswith("_API_KEY") or k.startswith("REASONING_LEDGER_LLM"))
    }
    params = StdioServerParameters(
        command=BIN, args=["serve", "--data-dir", data, "--toolsets", "agent,ledger"], env=env
    )
    async with Client(params, sampling_callback=sampling, mode=MODE) as client:
        tools = await client.list_tools()
        print("tools:", [t.name for t in tools.tools])
        r = await client.call_tool(
            "create_branch",
            {"session_id": "py", "input_text": "Does the Python client answer sampling for this branch?", "call_type": "verify"},
        )
        print("isError:", r.is_error)
        print("create_branch:", r.content[0].text)
        r = await client.call_tool("chat_agent", {"input_text": "hello from python", "session_id": "py"})
        print("chat_agent model:", json.loads(r.content[0].text)["model"])
        h = await client.call_tool("get_history", {"sessionId": "agent:py"})
        events = json.loads(h.content[0].text)["events"]
        print("events:", [e["type"] for e in events])
        print("transport:", [e["payload"]["model_call"]["transport"] for e in events if e["type"] == "model_call_recorded"])
        print("sampling callbacks:", len(calls), "temperature", calls[0].temperature, "max_tokens", calls[0].max_tokens)


asyncio.run(main())
