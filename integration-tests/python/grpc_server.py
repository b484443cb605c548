"""A gRPC upstream for integration-tests/tests/clients.rs: grpcio over TLS on 127.0.0.1,
no generated code (generic handlers, JSON messages).

argv: CERT KEY LOG. The real token is in $EXPECTED_TOKEN. Prints its port on the first line
of stdout, then serves until it is killed. Each call appends one JSON line to LOG saying
what arrived, as yes/no answers only (never the token itself).

/sluice.Echo/Unary (unary-unary), request {"text": ...}: answers {"authorized": ...,
"echo": the `authorization` metadata as it arrived, "text": the text as it arrived}.
/sluice.Echo/Stream (unary-stream), request {"count": N}: answers N such messages.
Both put the `authorization` metadata as it arrived in the trailing metadata `x-echo`, so
that the client shows what sluice made of a real value in a message and in a trailer.
"""

import json
import os
import sys
from concurrent import futures

import grpc

TOKEN = os.environ["EXPECTED_TOKEN"]
CERT, KEY, LOG = sys.argv[1:4]


def encode(message):
    return json.dumps(message).encode()


def arrived(method, request, context):
    """What the call brought, logged as yes/no answers; the `authorization` it carried."""
    metadata = dict(context.invocation_metadata())
    authorization = metadata.get("authorization", "")
    with open(LOG, "a") as log:
        log.write(
            json.dumps(
                {
                    "method": method,
                    "authorized": authorization == "Bearer " + TOKEN,
                    "text_swapped": request.get("text") == "echo " + TOKEN,
                    "token_anywhere_else": any(
                        TOKEN in value
                        for key, value in metadata.items()
                        if key != "authorization" and isinstance(value, str)
                    ),
                }
            )
            + "\n"
        )
    context.set_trailing_metadata((("x-echo", authorization),))
    return authorization


def unary(request, context):
    authorization = arrived("Unary", request, context)
    return {
        "authorized": authorization == "Bearer " + TOKEN,
        "echo": authorization,
        "text": request.get("text"),
    }


def stream(request, context):
    authorization = arrived("Stream", request, context)
    for seq in range(request["count"]):
        yield {"seq": seq, "authorized": authorization == "Bearer " + TOKEN, "echo": authorization}


handlers = grpc.method_handlers_generic_handler(
    "sluice.Echo",
    {
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=json.loads, response_serializer=encode
        ),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=json.loads, response_serializer=encode
        ),
    },
)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers((handlers,))
with open(KEY, "rb") as key, open(CERT, "rb") as cert:
    credentials = grpc.ssl_server_credentials(((key.read(), cert.read()),))
port = server.add_secure_port("127.0.0.1:0", credentials)
server.start()
print(port, flush=True)
server.wait_for_termination()
