"""A client that writes raw bytes to a real `torchdoctor serve` over stdio and reads every message
the server sends back: it can send what broken clients send (bad headers, cut-off bodies)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

from .conftest import SERVER_COMMAND, WAIT

INITIALIZE = {
    "capabilities": {},
    # jedi would spend seconds of CPU loading torch's stubs, which no test here needs
    "initializationOptions": {"settings": {"hoverSignatures": False}},
}


def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encoded(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


class WireClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[dict[str, Any]] = []
        self._reader = asyncio.get_running_loop().create_task(self._read_all())

    @classmethod
    async def start(cls) -> WireClient:
        process = await asyncio.create_subprocess_exec(
            *SERVER_COMMAND,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "TORCHDOCTOR_LOG_LEVEL": "ERROR"},
        )
        return cls(process)

    async def _read_all(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = None
            while (line := await stdout.readline()) not in (b"\r\n", b""):
                if match := re.match(rb"Content-Length: (\d+)\r\n", line):
                    length = int(match.group(1))
            if length is None:
                return  # the server closed its output
            self.received.append(json.loads(await stdout.readexactly(length)))

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(framed(encoded(message)))

    def answers(self, msg_id: Any) -> list[dict[str, Any]]:
        """The responses with this id (None: those with "id": null) received so far."""
        return [m for m in self.received if "method" not in m and "id" in m and m["id"] == msg_id]

    async def answer(self, msg_id: Any) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while not (found := self.answers(msg_id)):
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer with id {msg_id!r}; received {self.received}")
            if self._reader.done():
                raise AssertionError(f"the server closed its output; received {self.received}")
            await asyncio.sleep(0.01)
        assert len(found) == 1, found
        return found[0]

    async def request(self, msg_id: int, method: str, params: Any = None) -> dict[str, Any]:
        self.send({"id": msg_id, "method": method, "params": params})
        return await self.answer(msg_id)

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.process.wait(), WAIT)

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        self._reader.cancel()
