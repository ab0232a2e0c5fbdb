"""The Python `mcp` client against `reasoning-ledger serve --http`.

Usage: check.py URL TOKEN. With the token: the client connects (it tries 2026-07-28's
server/discover first), lists the tools, records a thought and reads it back. Without
a token, and with a wrong one: the connection is refused (HTTP 401). Exits non-zero,
saying what failed, otherwise prints one line per check.
"""

import asyncio
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url, http_client=http))


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
