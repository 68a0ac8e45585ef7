#!/usr/bin/env python3
"""Cut the chat-completions request schema out of OpenAI's OpenAPI document.

usage: extract_openai.py openapi.json > openai/chat-completions-request.schema.json

Keeps `components.schemas.CreateChatCompletionRequest` and every schema it
references, transitively, under the same JSON pointers, so that each `$ref`
resolves inside the output. One rewrite: the document is OpenAPI 3.1 but
still marks nullable fields the OpenAPI 3.0 way (`nullable: true`), which
JSON Schema ignores; each such schema gets `null` added to its `type` (or is
wrapped in `anyOf [..., {type: null}]` when it has no `type`), so that a
validator accepts what the API accepts. Nothing else is changed.
"""
import json
import sys

ROOT = "CreateChatCompletionRequest"
PREFIX = "#/components/schemas/"


def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith(PREFIX):
            out.add(r[len(PREFIX):])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def nullable(node):
    if isinstance(node, list):
        return [nullable(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: nullable(v) for k, v in node.items()}
    if node.pop("nullable", False) is True:
        t = node.get("type")
        if isinstance(t, str):
            node["type"] = [t, "null"]
        elif isinstance(t, list):
            if "null" not in t:
                node["type"] = t + ["null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


def main():
    doc = json.load(open(sys.argv[1]))
    schemas = doc["components"]["schemas"]
    keep, todo = set(), [ROOT]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        found = set()
        refs(schemas[name], found)
        todo.extend(found - keep)
    out = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": (
            "Cut from OpenAI's OpenAPI document (openai/openai-openapi, openapi.json, "
            f"info.version {doc['info']['version']}) by tests/schemas/extract_openai.py; "
            "MIT licence, see LICENSE-openai-openapi beside this file."
        ),
        "$ref": PREFIX + ROOT,
        "components": {"schemas": {k: nullable(schemas[k]) for k in sorted(keep)}},
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
