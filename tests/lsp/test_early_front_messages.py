"""The early front loses nothing: whatever a client sends before the server has loaded, each
request is answered once, by the front or by the server it hands the message to, and the server
receives every message the front did not answer, in the order it came."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from torchdoctor.lsp.early_start import EarlyFront
from torchdoctor.lsp.framing import Body

URIS = ("file:///work/a.py", "file:///work/b.py", "untitled:Untitled-1")
TEXTS = (
    "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
    "import torch.nn as nn\n\nclass Net(nn.Module):\n"
    "    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n",
    "def broken(:\n",
    "",
)


def _message(kind: str, number: int, uri: str, text: str) -> dict[str, Any]:
    item = {"uri": uri, "languageId": "python", "version": number, "text": text}
    identifier = {"textDocument": {"uri": uri}}
    return {
        "initialize": {"id": number, "method": "initialize", "params": {"capabilities": {}}},
        "initialize-pull": {
            "id": number,
            "method": "initialize",
            "params": {"capabilities": {"textDocument": {"diagnostic": {}}}},
        },
        "initialized": {"method": "initialized", "params": {}},
        "open": {"method": "textDocument/didOpen", "params": {"textDocument": item}},
        "change": {
            "method": "textDocument/didChange",
            "params": {
                "textDocument": {"uri": uri, "version": number},
                "contentChanges": [{"text": text}],
            },
        },
        "close": {"method": "textDocument/didClose", "params": identifier},
        "pull": {"id": number, "method": "textDocument/diagnostic", "params": identifier},
        "pull-again": {
            "id": number,
            "method": "textDocument/diagnostic",
            "params": {**identifier, "previousResultId": "early.1"},
        },
        "hover": {
            "id": number,
            "method": "textDocument/hover",
            "params": {**identifier, "position": {"line": 0, "character": 0}},
        },
        "shutdown": {"id": number, "method": "shutdown"},
        "exit": {"method": "exit"},
    }[kind]


KINDS = (
    "initialize", "initialize-pull", "initialized", "open", "change", "close", "pull",
    "pull-again", "hover", "shutdown", "exit",
)  # fmt: skip

# each message, and whether the front gets to analyse before the next one arrives
messages = st.lists(
    st.tuples(st.sampled_from(KINDS), st.sampled_from(URIS), st.sampled_from(TEXTS), st.booleans()),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(messages)
def test_every_request_is_answered_once_and_every_other_message_reaches_the_server(sequence):
    sent: list[dict[str, Any]] = []
    front = EarlyFront(send=lambda text: sent.append(json.loads(text)))
    bodies = []
    for number, (kind, uri, text, work) in enumerate(sequence, start=1):
        body = json.dumps({"jsonrpc": "2.0", **_message(kind, number, uri, text)}).encode()
        bodies.append(body)
        front.receive_body(body)
        if work:
            front.work()
    while front.pending:
        front.work()
    front.work()  # the pulls of the last document analysed

    assert not front.broken
    answered = [m["id"] for m in sent if "id" in m]
    assert len(answered) == len(set(answered)), sent
    replayed = [frame.data for frame in front.replay() if isinstance(frame, Body)]
    # the server receives the messages in their order, less the pulls the front answered
    assert replayed == [b for b in bodies if _id_of(b) not in answered or _is_initialize(b)]
    # what the server must handle without answering again: the initialize the front answered
    held = front.answered()
    assert all(_id_of(b) in held for b in bodies if _is_initialize(b) and _id_of(b) in answered)
    assert set(held) <= set(answered)
    # a publish is for a version the client opened
    opened = {
        (m["params"]["textDocument"]["uri"], m["params"]["textDocument"]["version"])
        for m in map(json.loads, bodies)
        if m.get("method") == "textDocument/didOpen"
    }
    for message in sent:
        if message.get("method") == "textDocument/publishDiagnostics":
            assert (message["params"]["uri"], message["params"]["version"]) in opened


def _id_of(body: bytes) -> Any:
    return json.loads(body).get("id")


def _is_initialize(body: bytes) -> bool:
    return bool(json.loads(body).get("method") == "initialize")
