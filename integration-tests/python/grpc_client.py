"""A gRPC client for integration-tests/tests/clients.rs: grpcio, no generated code.

argv: TARGET (host:port) CALL (unary or stream) OUT. grpcio finds its proxy in the
environment `sluice run` sets (it reads `grpc_proxy`, else `https_proxy`, else `http_proxy`,
and sends the Basic credentials of the URL as `Proxy-Authorization` on its CONNECT); the
run CA comes from `SSL_CERT_FILE`, since grpcio keeps roots of its own. Sends `authorization: Bearer $API_TOKEN` (the placeholder) and writes what
came back (messages, trailing metadata, status) to OUT as JSON.
"""

import json
import os
import sys

import grpc

target, call, out = sys.argv[1:4]
token = os.environ["API_TOKEN"]
with open(os.environ["SSL_CERT_FILE"], "rb") as bundle:
    credentials = grpc.ssl_channel_credentials(root_certificates=bundle.read())


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
