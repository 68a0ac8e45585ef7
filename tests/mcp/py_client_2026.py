"""The official Python SDK (PyPI `mcp` 2.x) against capsaga on the
stateless MCP 2026-07-28 revision (issue 26).

usage: py_client_2026.py URL WRITE_PATH TOKEN

Connects with the SDK's default mode (it probes `server/discover` and
speaks the newest revision both sides support), calls `time_now`, reads
the saga of that call as a resource, and calls `fs_write`, which the
test's policy makes wait for an operator's approval; prints one JSON
document with what it saw on stdout for the Rust test.
"""

import json
import sys

import anyio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(result):
    return {
        "is_error": bool(result.is_error),
        "text": "".join(getattr(c, "text", "") for c in result.content),
        "structured": result.structured_content,
    }


async def main():
    url, write_path, token = sys.argv[1:4]
    seen = {}
    async with create_mcp_http_client(headers={"Authorization": "Bearer " + token}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            seen["protocol_version"] = client.protocol_version
            seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            seen["time_now"] = dump(await client.call_tool("time_now", {}))
            saga = (seen["time_now"]["structured"] or {}).get("saga_id")
            read = await client.read_resource("capsaga://sagas/" + str(saga))
            seen["resource"] = json.loads(read.contents[0].text)
            seen["approval"] = dump(
                await client.call_tool("fs_write", {"path": write_path, "content": "py\n"})
            )
    print(json.dumps(seen))


anyio.run(main)
