"""A gRPC client for integration-tests/tests/clients.rs: grpcio, no generated code.

argv: TARGET (host:port) CALL (unary or stream) OUT. grpcio finds its proxy in the
environment `sluice run` sets (it reads `grpc_proxy`, else `https_proxy`, else `http_proxy`,
and sends the Basic credentials of the URL as `Proxy-Authorization` on its CONNECT); it
trusts what a default grpcio client trusts: `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`, which
`sluice run` points at the run bundle over any inherited value (grpcio keeps roots of its
own otherwise). Sends `authorization: Bearer $API_TOKEN` (the placeholder) and writes what
came back (messages, trailing metadata, status) to OUT as JSON.
"""

import json
import os
import sys

import grpc

target, call, out = sys.argv[1:4]
token = os.environ["API_TOKEN"]
credentials = grpc.ssl_channel_credentials()


def encode(message):
    return json.dumps(message).encode()


metadata = (("authorization", "Bearer " + token),)
with grpc.secure_channel(target, credentials) as channel:
    try:
        if call == "unary":
            method = channel.unary_unary(
                "/sluice.Echo/Unary", request_serializer=encode, response_deserializer=json.loads
            )
            reply, done = method.with_call(
                {"text": "echo " + token}, metadata=metadata, timeout=20
            )
            messages = [reply]
        else:
            method = channel.unary_stream(
                "/sluice.Echo/Stream", request_serializer=encode, response_deserializer=json.loads
            )
            done = method({"count": 3}, metadata=metadata, timeout=20)
            messages = list(done)
    except grpc.RpcError as error:
        print("rpc failed:", error.code(), error.details(), file=sys.stderr)
        sys.exit(1)
    seen = {
        "code": done.code().name,
        "messages": messages,
        "trailers": dict(done.trailing_metadata() or ()),
    }
with open(out, "w") as file:
    json.dump(seen, file)
print(json.dumps(seen))
