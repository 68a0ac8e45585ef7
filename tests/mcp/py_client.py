"""A real MCP client (the official Python SDK, PyPI `mcp`) against capsaga.

usage: py_client.py stdio CAPSAGA CONFIG WRITE_PATH
       py_client.py http URL WRITE_PATH [TOKEN]

Lists the tools, calls `time_now`, writes a file with `fs_write`, gets a
tool error (arguments the schema refuses), hits an approval (`fs_edit`,
which the test's policy marks `approve = "always"`), commits the saga, and
prints one JSON document with what it saw on stdout for the Rust test.
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def field(obj, snake, camel):
    """SDK 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake, None) if hasattr(obj, snake) else getattr(obj, camel, None)


def dump(result):
    return {
        "is_error": bool(field(result, "is_error", "isError")),
        "text": "".join(getattr(c, "text", "") for c in result.content),
        "structured": field(result, "structured_content", "structuredContent"),
    }


async def exercise(session, write_path):
    seen = {}
    init = await session.initialize()
    seen["server"] = field(init, "server_info", "serverInfo").name
    tools = await session.list_tools()
    seen["tools"] = sorted(t.name for t in tools.tools)
    seen["annotations"] = {
        t.name: (t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None)
        for t in tools.tools
    }
    seen["time_now"] = dump(await session.call_tool("time_now", {}))
    seen["fs_write"] = dump(
        await session.call_tool("fs_write", {"path": write_path, "content": "from python\n"})
    )
    seen["bad_args"] = dump(await session.call_tool("fs_write", {"nope": 1}))
    seen["approval"] = dump(
        await session.call_tool(
            "fs_edit", {"path": write_path, "old_string": "python", "new_string": "PYTHON"}
        )
    )
    seen["rollback"] = dump(await session.call_tool("capsaga_rollback", {}))
    seen["again"] = dump(
        await session.call_tool("fs_write", {"path": write_path + ".2", "content": "kept\n"})
    )
    seen["commit"] = dump(await session.call_tool("capsaga_commit", {}))
    return seen


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        capsaga, config, write_path = sys.argv[2:5]
        params = StdioServerParameters(
            command=capsaga, args=["--config", config, "mcp", "--no-elicitation"]
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                seen = await exercise(session, write_path)
    else:
        url, write_path = sys.argv[2:4]
        headers = {}
        if len(sys.argv) > 4:
            headers["Authorization"] = "Bearer " + sys.argv[4]
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    seen = await exercise(session, write_path)
    print(json.dumps(seen))


anyio.run(main)
