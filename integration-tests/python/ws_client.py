"""A WebSocket client for integration-tests/tests/websocket.rs: Python's `websockets`
through sluice's proxy (CONNECT, then TLS trusting the run CA).

argv: URL PROXY CA COMPRESSION MESSAGES. COMPRESSION is `deflate` (the library's default
offer) or `none`. MESSAGES is a JSON list; each entry is {"text": T}, {"fragments": [T...]}
(one message sent as several frames) or {"binary": HEX}. After each, one reply is awaited.

Prints JSON lines: first {"extensions": the 101's Sec-WebSocket-Extensions}, then
{"reply": T} or {"binary": HEX} per reply, and {"closed": CODE, "reason": R} if the
connection closes.
"""

import asyncio
import json
import ssl
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

URL, PROXY, CA, COMPRESSION, MESSAGES = sys.argv[1:6]


def say(entry):
    print(json.dumps(entry), flush=True)


async def main():
    context = ssl.create_default_context(cafile=CA)
    compression = "deflate" if COMPRESSION == "deflate" else None
    async with connect(
        URL, proxy=PROXY, ssl=context, compression=compression, open_timeout=10
    ) as ws:
        say({"extensions": ws.response.headers.get("Sec-WebSocket-Extensions")})
        try:
            for message in json.loads(MESSAGES):
                if "text" in message:
                    await ws.send(message["text"])
                elif "fragments" in message:
                    await ws.send(message["fragments"])
                else:
                    await ws.send(bytes.fromhex(message["binary"]))
                reply = await asyncio.wait_for(ws.recv(), 10)
                if isinstance(reply, bytes):
                    say({"binary": reply.hex()})
                else:
                    say({"reply": reply})
        except ConnectionClosed as closed:
            frame = closed.rcvd
            say(
                {
                    "closed": frame.code if frame else None,
                    "reason": frame.reason if frame else None,
                }
            )


asyncio.run(main())
