"""PUT a file as a signed aws-chunked stream (x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD), or
with a signed trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER), written after AWS's documentation.

Usage: aws_chunked_client.py [--tamper] [--trailer] [--tamper-trailer] [--unannounced] [--second-coding] [--key-in-trailer] URL FILE [REGION [SERVICE]]

Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. REGION
and SERVICE default to what an amazonaws.com host names (s3.eu-west-1.amazonaws.com), else to
AWS_REGION or AWS_DEFAULT_REGION and s3. HTTPS_PROXY (and NO_PROXY) is honoured through a
CONNECT tunnel, and AWS_CA_BUNDLE or SSL_CERT_FILE names the CA to trust. The body goes in
64 KiB chunks, each signed on from the one before; --tamper flips a byte of the first chunk
after signing it, which a verifier must refuse. --trailer announces `x-amz-trailer:
x-amz-checksum-crc32` and sends the data's CRC32 after the last chunk, signed on from it
(`AWS4-HMAC-SHA256-TRAILER`); --tamper-trailer changes that checksum after signing it;
--unannounced announces x-amz-checksum-sha256 and sends (and signs) the CRC32 anyway;
--second-coding sends `Content-Encoding: aws-chunked` and `Content-Encoding: gzip` as two fields,
signed as SigV4 joins them (`aws-chunked,gzip`); --key-in-trailer announces and signs a second
trailer, `x-amz-meta-note:` holding AWS_ACCESS_KEY_ID. Prints
the status and the response body, and exits 0 on a 2xx.
"""
import base64
import hashlib
import http.client
import os
import ssl
import sys
import urllib.request
import zlib
from urllib.parse import unquote, urlsplit

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
CHUNK = 64 * 1024
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

args = sys.argv[1:]
tamper, tamper_trailer, unannounced = "--tamper" in args, "--tamper-trailer" in args, "--unannounced" in args
second_coding, key_in_trailer = "--second-coding" in args, "--key-in-trailer" in args
trailer = "--trailer" in args or tamper_trailer or unannounced or key_in_trailer
args = [a for a in args if not a.startswith("--")]
if trailer:
    STREAMING += "-TRAILER"
url, path = args[0], args[1]
parts = urlsplit(url)
labels = parts.hostname.split(".")
if "amazonaws" in labels and labels.index("amazonaws") >= 2:
    service, region = labels[labels.index("amazonaws") - 2:labels.index("amazonaws")]
else:
    service, region = "s3", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
region = args[2] if len(args) > 2 else region
service = args[3] if len(args) > 3 else service


def frame_length(size):
    return len("%x;chunk-signature=" % size) + 64 + 2 + size + 2


size = os.path.getsize(path)
sizes = [min(CHUNK, size - offset) for offset in range(0, size, CHUNK)] + [0]
crc = 0
with open(path, "rb") as f:
    for block in iter(lambda: f.read(CHUNK), b""):
        crc = zlib.crc32(block, crc)
checksum = base64.b64encode(crc.to_bytes(4, "big")).decode()
trailer_line = "x-amz-checksum-crc32:" + checksum
if key_in_trailer:
    trailer_line += "\nx-amz-meta-note:" + os.environ["AWS_ACCESS_KEY_ID"]
# The last chunk's line, then (with a trailer) the trailer, its signature and the empty line.
# Signed as `name:value\n` lines; sent as CRLF lines.
trailer_wire = trailer_line.replace("\n", "\r\n")
trailer_length = len(trailer_wire) + 2 + len("x-amz-trailer-signature:") + 64 + 2 if trailer else 0


class Signer(S3SigV4Auth if service == "s3" else SigV4Auth):
    def payload(self, request):
        # The seed signature covers this constant, not a hash of the (not yet read) body.
        return STREAMING


credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                          os.environ.get("AWS_SESSION_TOKEN") or None)
signer = Signer(credentials, service, region)
request = AWSRequest(method="PUT", url=url, headers={
    "Host": parts.netloc,  # signed exactly as http.client will send it
    "Content-Encoding": "aws-chunked,gzip" if second_coding else "aws-chunked",
    "Content-Length": str(sum(frame_length(s) for s in sizes) + trailer_length),
    "X-Amz-Content-SHA256": STREAMING,
    "X-Amz-Decoded-Content-Length": str(size),
    **({"X-Amz-Trailer": "x-amz-checksum-sha256" if unannounced
        else "x-amz-checksum-crc32,x-amz-meta-note" if key_in_trailer
        else "x-amz-checksum-crc32"} if trailer else {}),
})
signer.add_auth(request)
seed = request.headers["Authorization"].rpartition("Signature=")[2]


def body():
    previous, first = seed, True
    with open(path, "rb") as f:
        for chunk_size in sizes:
            data = f.read(chunk_size)
            previous = signer.signature("\n".join([
                "AWS4-HMAC-SHA256-PAYLOAD", request.context["timestamp"], signer.credential_scope(request),
                previous, EMPTY_SHA256, hashlib.sha256(data).hexdigest()]), request)
            if tamper and first and data:
                data = bytes([data[0] ^ 1]) + data[1:]
            first = False
            if chunk_size or not trailer:
                # Without a trailer, the last, 0-size, chunk so ends in an empty line.
                yield b"%x;chunk-signature=%s\r\n%s\r\n" % (len(data), previous.encode(), data)
                continue
            # The trailer, signed on from the last chunk's signature over its `name:value\n`.
            signature = signer.signature("\n".join([
                "AWS4-HMAC-SHA256-TRAILER", request.context["timestamp"], signer.credential_scope(request),
                previous, hashlib.sha256((trailer_line + "\n").encode()).hexdigest()]), request)
            sent = trailer_wire if not tamper_trailer else "x-amz-checksum-crc32:AAAAAA=="
            yield b"0;chunk-signature=%s\r\n%s\r\nx-amz-trailer-signature:%s\r\n\r\n" % (
                previous.encode(), sent.encode(), signature.encode())


# The CA named for the AWS CLI (AWS_CA_BUNDLE) or for OpenSSL (SSL_CERT_FILE), else the system's.
context = ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE"))
proxy = urllib.request.getproxies().get("https")
if proxy and not urllib.request.proxy_bypass(parts.hostname):
    proxy = urlsplit(proxy)
    connection = http.client.HTTPSConnection(proxy.hostname, proxy.port or 80, context=context)
    tunnel_headers = {}
    if proxy.username:
        login = "%s:%s" % (unquote(proxy.username), unquote(proxy.password or ""))
        tunnel_headers["Proxy-Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
    connection.set_tunnel(parts.hostname, parts.port or 443, headers=tunnel_headers)
else:
    connection = http.client.HTTPSConnection(parts.hostname, parts.port or 443, context=context)
# A proxy speaks plain HTTP until CONNECT; http.client wraps TLS only after the tunnel is up.
target = parts.path + ("?" + parts.query if parts.query else "")
headers = dict(request.headers.items())
if second_coding:
    # Two fields (another key spelling: http.client sends both), signed as one.
    headers["Content-Encoding"] = "aws-chunked"
    headers["content-encoding"] = "gzip"
connection.request("PUT", target or "/", body=body(), headers=headers)
response = connection.getresponse()
print(response.status)
print(response.read().decode(errors="replace"))
sys.exit(0 if 200 <= response.status < 300 else 1)
