"""The Python `mcp` client against `reasoning-ledger serve --http`.

Usage: check.py URL TOKEN. With the token: the client connects (it tries 2026-07-28's
server/discover first), lists the tools, records a thought and reads it back; then the
scripts prompts written for the reference servers run, never passing a session id
(sequentialthinking 1/3..3/3, three `think` calls of one purpose between another
purpose's, QA thought 2, `deep_planning` clarify after init): each must continue one
session (issue 42). Without a token, and with a wrong one: the connection is refused
(HTTP 401). Exits non-zero, saying what failed, otherwise prints one line per check.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url, http_client=http))


async def answer(session, tool: str, arguments: dict) -> dict:
    """A tool's answer as JSON (its structured content, else its text), never an error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, (tool, arguments, result)
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def continues(session) -> None:
    """Calls without a session id continue the caller's session, as prompts expect."""

    def thought(n: int) -> dict:
        return {"thought": f"step {n}", "thoughtNumber": n, "totalThoughts": 3,
                "nextThoughtNeeded": n < 3}

    first = await answer(session, "sequentialthinking", thought(1))
    for n in (2, 3):
        then = await answer(session, "sequentialthinking", thought(n))
        assert then["sessionId"] == first["sessionId"], (n, first, then)
        assert then["thoughtHistoryLength"] == n, then

    def think(purpose: str, index: int) -> dict:
        return {"thread_purpose": purpose, "thought": f"{purpose} {index}",
                "thought_index": index}

    threads = {}
    for purpose, index in (("A", 1), ("A", 2), ("B", 1), ("A", 3), ("B", 2)):
        got = await answer(session, "think", think(purpose, index))
        threads.setdefault(purpose, set()).add(got["sessionId"])
    assert all(len(ids) == 1 for ids in threads.values()), threads
    assert threads["A"] != threads["B"], threads

    def qa(n: int) -> dict:
        return {"thought": f"qa {n}", "thought_number": n, "total_thoughts": 2,
                "next_thought_needed": n < 2}

    qa_first = await answer(session, "sequentialthinking_qa", qa(1))
    qa_next = await answer(session, "sequentialthinking_qa", qa(2))
    assert qa_next["session_id"] == qa_first["session_id"], (qa_first, qa_next)
    assert qa_next["thought_history_length"] == 2, qa_next

    init = await answer(session, "deep_planning", {"phase": "init", "problem": "Ship it"})
    clarified = await answer(session, "deep_planning", {"phase": "clarify", "question": "When?"})
    assert clarified["sessionId"] == init["sessionId"], (init, clarified)
    assert clarified["phase"] == "clarify", clarified
    print("python mcp: sessions continue without a session id (thinking, think, qa, planning)")


async def main(url: str, token: str) -> None:
    async with client(url, token) as session:
        tools = await session.list_tools()
        names = {tool.name for tool in tools.tools}
        assert "sequentialthinking" in names, names
        result = await session.call_tool(
            "sequentialthinking",
            {
                "thought": "from the python mcp client",
                "thoughtNumber": 1,
                "totalThoughts": 1,
                "nextThoughtNeeded": False,
            },
        )
        assert not result.is_error, result
        session_id = result.structured_content["sessionId"]
        history = await session.call_tool("get_history", {"sessionId": session_id})
        assert "from the python mcp client" in str(history.content), history
        print(f"python mcp: with the token: {len(names)} tools, thought recorded in {session_id}")
        await continues(session)
    for label, token_ in (("no token", None), ("a wrong token", "wrong")):
        try:
            async with client(url, token_) as session:
                await session.list_tools()
        except Exception as error:  # the SDK reports the 401 as "Server returned an error response"
            print(f"python mcp: with {label}: refused ({type(error).__name__})")
        else:
            raise AssertionError(f"connected with {label}")
    # What the SDK saw: 401 for no token and for a wrong one.
    async with httpx2.AsyncClient() as raw:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = await raw.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers
            )
            assert response.status_code == 401, response.status_code
    print("python mcp: raw requests without a valid token: 401")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
