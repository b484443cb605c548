"""A WebSocket upstream for integration-tests/tests/websocket.rs: Python's `websockets`
over TLS on 127.0.0.1, permessage-deflate offered as the library does by default.

argv: CERT KEY LOG. The real token is in $EXPECTED_TOKEN. Prints its port on the first line
of stdout, then serves until it is killed. Each connection appends one JSON line to LOG
when it opens (the path, whether permessage-deflate was negotiated), and one per message
it receives, as yes/no answers and lengths only (never the token itself).

Each text message is a command:
  echo:TEXT       TEXT back, in one frame
  fragments:TEXT  TEXT back, as a message fragmented into 3-character frames
  leak            the real token back, in one frame
  leak-fragments  the real token back, fragmented into 2-character frames
  ping:TEXT       a ping carrying TEXT, then "pinged" once its pong arrives
  rsv             a frame with RSV2 set, which no extension negotiated explains
Binary messages are echoed back as they came.
"""

import asyncio
import json
import os
import ssl
import sys

from websockets.asyncio.server import serve

TOKEN = os.environ["EXPECTED_TOKEN"]
CERT, KEY, LOG = sys.argv[1:4]


def log(entry):
    with open(LOG, "a") as out:
        out.write(json.dumps(entry) + "\n")


def pieces(text, size):
    return [text[i : i + size] for i in range(0, len(text), size)]


async def handler(ws):
    extensions = [type(e).__name__ for e in ws.protocol.extensions]
    log({"opened": ws.request.path, "deflate": "PerMessageDeflate" in extensions})
    async for message in ws:
        if isinstance(message, bytes):
            log({"binary": len(message), "holds_token": TOKEN.encode() in message})
            await ws.send(message)
            continue
        log(
            {
                "text": message if TOKEN not in message else None,
                "holds_token": TOKEN in message,
                "is_token_command": message == "echo:token=" + TOKEN,
            }
        )
        command, _, rest = message.partition(":")
        if command == "echo":
            await ws.send(rest)
        elif command == "fragments":
            await ws.send(pieces(rest, 3))
        elif command == "leak":
            await ws.send("here it is: " + TOKEN)
        elif command == "leak-fragments":
            await ws.send(pieces("here it is: " + TOKEN, 2))
        elif command == "ping":
            pong = await ws.ping(rest)
            await pong
            await ws.send("pinged")
        elif command == "rsv":
            # FIN, RSV2, text; two bytes of payload.
            ws.transport.write(b"\xa1\x02hi")
        else:
            await ws.send("unknown command")


async def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT, KEY)
    async with serve(handler, "127.0.0.1", 0, ssl=context) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.get_running_loop().create_future()


asyncio.run(main())
