"""An HTTPS upstream that checks AWS Signature Version 4 as AWS does, with the real key.

Usage: aws_upstream.py HOST PORT CERT KEY LOG, with the real credentials in UPSTREAM_AWS_ACCESS_KEY_ID,
UPSTREAM_AWS_SECRET_ACCESS_KEY and, optionally, UPSTREAM_AWS_SESSION_TOKEN. Writes LOG.ready once it listens.

Each request needs the real key id (and session token, when set) and a SigV4 signature, in the Authorization
header or a presigned query, that botocore's signer recomputes with the real secret; aws-chunked bodies are
unframed and each chunk signature, the trailer signature (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: the trailers
must be those x-amz-trailer announces) and x-amz-checksum-* checked. A refusal is a 403 (400 when the body does not
match its hash) with AWS's error XML; SignatureDoesNotMatch carries AWSAccessKeyId, StringToSign and
CanonicalRequest, as AWS's does. One JSON line per request goes to LOG: method, path, query, service, region,
form (header|query|none), payload (x-amz-content-sha256), verified, error (the code answered, or null),
message, body_sha256 (of the decoded body), headers.

Behind the check: a tiny in-memory path-style S3 (bucket sluice-test exists), enough for `aws s3 ls|cp|presign`
and boto3, and STS GetCallerIdentity, whose UserId is the key id the request carried, so a test can see
whether the real one leaks back.
"""
import base64
import calendar
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import ssl
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from urllib.parse import parse_qsl, quote, unquote
from xml.sax.saxutils import escape

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials
from botocore.httpchecksum import _CHECKSUM_CLS

host, port, cert, key, log = sys.argv[1:6]
AKID = os.environ["UPSTREAM_AWS_ACCESS_KEY_ID"]
TOKEN = os.environ.get("UPSTREAM_AWS_SESSION_TOKEN") or None
CREDENTIALS = Credentials(AKID, os.environ["UPSTREAM_AWS_SECRET_ACCESS_KEY"], TOKEN)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
SIGNED_STREAM, UNSIGNED_STREAM = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMS = (SIGNED_STREAM, UNSIGNED_STREAM, SIGNED_TRAILER)
STATUS = {"XAmzContentSHA256Mismatch": 400, "BadDigest": 400, "IncompleteBody": 400, "InvalidRequest": 400,
          "AuthorizationHeaderMalformed": 400, "MalformedTrailerError": 400, "InvalidPart": 400, "InvalidAction": 400, "NoSuchBucket": 404,
          "NoSuchKey": 404, "NoSuchUpload": 404, "InvalidRange": 416, "NotImplemented": 501}
S3_NS, STS_NS = "http://s3.amazonaws.com/doc/2006-03-01/", "https://sts.amazonaws.com/doc/2011-06-15/"
START = time.time()
BUCKETS = {"sluice-test": {}}  # bucket -> key -> {data, etag, type, mtime, checksums}
UPLOADS = {}  # upload id -> {parts: {number: (data, etag)}, type}
LOCK = threading.Lock()


class Refused(Exception):
    def __init__(self, code, message, **extra):
        super().__init__(code)
        self.code, self.message, self.extra = code, message, extra


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def same(a, b):
    return hmac.compare_digest((a or "").encode(), (b or "").encode())


def unchunk(data, signed):
    """Split an aws-chunked body (`size[;chunk-signature=S]\\r\\ndata\\r\\n`..., a 0-size chunk,
    then trailer lines and an empty line) into its chunks, their signatures and the trailers."""
    chunks, signatures, pos = [], [], 0
    try:
        while not chunks or chunks[-1]:
            end = data.index(b"\r\n", pos)
            size, _, extension = data[pos:end].partition(b";")
            size, pos = int(size, 16), end + 2
            if signed and not extension.startswith(b"chunk-signature="):
                raise ValueError("a chunk without a signature")
            signatures += [extension[16:].decode()] if signed else []
            chunks.append(data[pos:pos + size])
            if size and data[pos + size:pos + size + 2] != b"\r\n":
                raise ValueError("chunk data not followed by CRLF")
            pos += size + 2 if size else 0
        if not (data[pos:] == b"\r\n" or data[pos:].endswith(b"\r\n\r\n")):
            raise ValueError("trailer not ended by an empty line")
    except ValueError as e:
        raise Refused("IncompleteBody", "Bad aws-chunked encoding: %s" % e)
    trailers = (line.decode().partition(":")[::2] for line in data[pos:].split(b"\r\n") if line)
    return chunks, signatures, {k.strip().lower(): v.strip() for k, v in trailers}


def verify(command, headers, path, pairs, raw, entry):
    """Check the request as AWS would; return its decoded body, x-amz-checksum-* values, key id."""
    payload = headers.get("x-amz-content-sha256")
    chunks, signatures, trailers = [raw], [], {}
    if payload in STREAMS:
        chunks, signatures, trailers = unchunk(raw, payload != UNSIGNED_STREAM)
    body = b"".join(chunks)
    entry["body_sha256"] = sha256(body)
    if payload and payload.startswith("STREAMING-") and payload not in STREAMS:
        raise Refused("NotImplemented", "This fixture does not implement %s" % payload)

    query = dict(pairs)
    if "Authorization" in headers:
        algorithm, _, rest = headers["Authorization"].partition(" ")
        fields = dict(part.strip().partition("=")[::2] for part in rest.split(","))
        credential, signed, signature = (fields.get(n, "") for n in ("Credential", "SignedHeaders", "Signature"))
        stamp, token, entry["form"] = headers.get("X-Amz-Date"), headers.get("X-Amz-Security-Token"), "header"
    elif "X-Amz-Signature" in query:
        algorithm, credential, signed, signature, stamp, token = (query.get("X-Amz-" + n) or "" for n in (
            "Algorithm", "Credential", "SignedHeaders", "Signature", "Date", "Security-Token"))
        token, entry["form"] = token or None, "query"
        pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]  # everything but itself is signed
    elif "AWSAccessKeyId" in query:  # boto3 presigns S3 URLs with SigV2 unless told signature_version=s3v4
        raise Refused("AccessDenied", "Only Signature Version 4 is accepted here, not SigV2")
    else:
        raise Refused("AccessDenied", "Access Denied")
    scope = credential.split("/")
    if algorithm != "AWS4-HMAC-SHA256" or len(scope) != 5 or scope[4] != "aws4_request":
        raise Refused("AuthorizationHeaderMalformed", "Unsupported algorithm or malformed credential scope")
    akid, _, region, service, _ = scope
    entry["region"], entry["service"] = region, service
    if not same(akid, AKID):
        raise Refused("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
    if (token is None) != (TOKEN is None) or not same(token, TOKEN):
        raise Refused("InvalidToken", "The provided token is malformed or otherwise invalid.")
    try:
        age = time.time() - calendar.timegm(time.strptime(stamp or "", "%Y%m%dT%H%M%SZ"))
        lifetime = int(query.get("X-Amz-Expires", "0"))
    except ValueError:
        raise Refused("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    if entry["form"] == "query" and age > lifetime:
        raise Refused("AccessDenied", "Request has expired")
    if abs(age) > 900 and (entry["form"] == "header" or age < 0):
        raise Refused("RequestTimeTooSkewed", "The difference between the request time and now is too large.")

    names = signed.split(";")
    if "host" not in names:
        raise Refused("SignatureDoesNotMatch", "The host header must be signed")
    signed_headers = HTTPHeaders()
    for name in names:
        for value in headers.get_all(name, []):
            signed_headers[name] = value
    if payload is None and service == "s3" and entry["form"] == "header":
        raise Refused("InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
    if payload is None:  # presigned S3 URLs sign no body; other services sign its hash
        payload = "UNSIGNED-PAYLOAD" if service == "s3" else sha256(body)
    # S3 signs the path as sent; other services normalize it and encode it twice.
    signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(CREDENTIALS, service, region)
    # Sign what the client says it signed, as AWS does: its SignedHeaders (botocore would choose
    # its own, leaving out e.g. user-agent) and the payload hash found above.
    signer.headers_to_sign = lambda request: signed_headers
    signer.payload = lambda request: payload
    # The query goes in as decoded pairs: botocore re-encodes and sorts them, as AWS canonicalizes.
    request = AWSRequest(method=command, url="https://%s%s" % (headers.get("Host", ""), path), params=pairs)
    request.context["timestamp"] = stamp  # what add_auth would take from the clock
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    if not same(signer.signature(string_to_sign, request), signature):
        raise Refused("SignatureDoesNotMatch", "The request signature we calculated does not match the signature "
                      "you provided. Check your key and signing method.", AWSAccessKeyId=akid,
                      StringToSign=string_to_sign, CanonicalRequest=canonical)

    if payload not in ("UNSIGNED-PAYLOAD",) + STREAMS and not same(payload, sha256(raw)):
        raise Refused("XAmzContentSHA256Mismatch",
                      "The provided 'x-amz-content-sha256' header does not match what was computed.")
    previous = signature  # each chunk signature chains on the one before, seeded by the request's
    for number, (chunk, chunk_signature) in enumerate(zip(chunks, signatures)):
        to_sign = ["AWS4-HMAC-SHA256-PAYLOAD", stamp, signer.credential_scope(request), previous, EMPTY_SHA256]
        previous = signer.signature("\n".join(to_sign + [sha256(chunk)]), request)
        if not same(previous, chunk_signature):
            raise Refused("InvalidChunkSignature", "The signature of chunk %d does not match" % number)
    if payload == SIGNED_TRAILER:
        # The trailers announced, then their signature over `name:value\n` lines (sorted),
        # chained on the last chunk's.
        trailer_signature = trailers.pop("x-amz-trailer-signature", None)
        announced = sorted(n.strip().lower() for n in headers.get("x-amz-trailer", "").split(",") if n.strip())
        if trailer_signature is None or announced != sorted(trailers):
            raise Refused("MalformedTrailerError", "The request contained trailing data that was not well-formed "
                          "or did not conform to our published schema.")
        canonical = "".join("%s:%s\n" % (name, trailers[name]) for name in sorted(trailers))
        to_sign = ["AWS4-HMAC-SHA256-TRAILER", stamp, signer.credential_scope(request), previous,
                   sha256(canonical.encode())]
        if not same(signer.signature("\n".join(to_sign), request), trailer_signature):
            raise Refused("SignatureDoesNotMatch", "The trailer signature does not match")
        entry["trailer_verified"] = True
    if payload.startswith("STREAMING-") and headers.get("x-amz-decoded-content-length") not in (None, str(len(body))):
        raise Refused("IncompleteBody", "x-amz-decoded-content-length does not match the decoded body")
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    if headers.get("Content-MD5", md5) != md5:
        raise Refused("BadDigest", "The Content-MD5 you specified did not match what we received.")
    checksums = {n.lower(): v for n, v in list(headers.items()) + list(trailers.items())
                 if n.lower()[:15] == "x-amz-checksum-" and n.lower()[15:] not in ("algorithm", "type", "mode")}
    for name, value in checksums.items():
        # botocore has crc32, sha1, sha256, sha512; crc32c and crc64nvme only with awscrt,
        # otherwise they go unchecked. A POST (CompleteMultipartUpload) carries the whole object's.
        checksum = _CHECKSUM_CLS.get(name[15:])
        if checksum and command == "PUT" and checksum().handle(body) != value:
            raise Refused("BadDigest", "The %s you specified did not match the calculated checksum." % name)
    return body, checksums, akid


def xml(root, inner, namespace=S3_NS):
    ns = ' xmlns="%s"' % namespace if namespace else ""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<%s%s>%s</%s>' % (root, ns, inner, root)).encode()


def elements(**values):
    return "".join("<%s>%s</%s>" % (k, escape(str(v)), k) for k, v in values.items())


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def listing(bucket, objects, query):
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    url = query.get("encoding-type") == "url"
    encode = quote if url else str  # the CLI asks for url-encoded keys, and decodes them
    keys, prefixes = [], set()
    for name in sorted(n for n in objects if n.startswith(prefix)):
        cut = name.find(delimiter, len(prefix)) if delimiter else -1
        if cut >= 0:
            prefixes.add(name[:cut + len(delimiter)])
        else:
            keys.append(name)
    inner = elements(Name=bucket, Prefix=encode(prefix), MaxKeys=1000, IsTruncated="false")
    inner += elements(KeyCount=len(keys) + len(prefixes)) if query.get("list-type") == "2" else ""
    inner += elements(Delimiter=encode(delimiter)) if delimiter else ""
    inner += elements(EncodingType="url") if url else ""
    for name in keys:
        o = objects[name]
        inner += "<Contents>%s</Contents>" % elements(Key=encode(name), LastModified=iso(o["mtime"]),
                                                      ETag=o["etag"], Size=len(o["data"]), StorageClass="STANDARD")
    for p in sorted(prefixes):
        inner += "<CommonPrefixes>%s</CommonPrefixes>" % elements(Prefix=encode(p))
    return 200, {}, xml("ListBucketResult", inner)


def get_object(objects, name, headers):
    if name not in objects:
        raise Refused("NoSuchKey", "The specified key does not exist.")
    o = objects[name]
    data, status = o["data"], 200
    reply = {"ETag": o["etag"], "Content-Type": o["type"], "Accept-Ranges": "bytes",
             "Last-Modified": email.utils.formatdate(o["mtime"], usegmt=True)}
    if headers.get("Range", "").startswith("bytes="):  # the CLI fetches big objects in ranges
        first, _, last = headers["Range"][6:].partition("-")
        start = max(len(data) - int(last), 0) if first == "" else int(first)
        end = len(data) - 1 if first == "" or last == "" else min(int(last), len(data) - 1)
        if start > end:
            raise Refused("InvalidRange", "The requested range is not satisfiable")
        reply["Content-Range"] = "bytes %d-%d/%d" % (start, end, len(data))
        data, status = data[start:end + 1], 206
    elif headers.get("x-amz-checksum-mode", "").upper() == "ENABLED":  # botocore then checks what it got
        reply.update(o["checksums"])
    return status, reply, data


def s3(command, path, query, headers, body, checksums, akid):
    bucket, _, name = unquote(path).lstrip("/").partition("/")
    if not bucket and command == "GET":
        items = "".join("<Bucket>%s</Bucket>" % elements(Name=b, CreationDate=iso(START)) for b in BUCKETS)
        owner = "<Owner>%s</Owner>" % elements(ID="sluice", DisplayName="sluice")
        return 200, {}, xml("ListAllMyBucketsResult", owner + "<Buckets>%s</Buckets>" % items)
    if bucket and not name and command == "PUT":
        BUCKETS.setdefault(bucket, {})
        return 200, {"Location": "/" + bucket}, b""
    if bucket and bucket not in BUCKETS:
        raise Refused("NoSuchBucket", "The specified bucket does not exist")
    objects, upload = BUCKETS.get(bucket), UPLOADS.get(query.get("uploadId"))
    if "uploadId" in query and upload is None:
        raise Refused("NoSuchUpload", "The specified upload does not exist.")
    if bucket and not name and command in ("GET", "HEAD"):  # ListObjects(V2), HeadBucket
        return listing(bucket, objects, query) if command == "GET" else (200, {}, b"")
    if not name:
        raise Refused("NotImplemented", "Not implemented here: %s %s" % (command, path))
    etag = '"%s"' % hashlib.md5(body).hexdigest()
    if command in ("GET", "HEAD"):
        return get_object(objects, name, headers)
    if command == "DELETE":
        (UPLOADS if upload else objects).pop(query.get("uploadId", name), None)
        return 204, {}, b""
    if command == "PUT" and upload:
        upload["parts"][int(query["partNumber"])] = (body, etag)
        return 200, dict(checksums, ETag=etag), b""  # echoing checksums is how S3 says it checked them
    if command == "PUT":
        objects[name] = {"data": body, "etag": etag, "type": headers.get("Content-Type", "binary/octet-stream"),
                         "mtime": time.time(), "checksums": checksums}
        return 200, dict(checksums, ETag=etag), b""
    if command == "POST" and "uploads" in query:
        upload_id = uuid.uuid4().hex
        UPLOADS[upload_id] = {"parts": {}, "type": headers.get("Content-Type", "binary/octet-stream")}
        echo = {h: headers[h] for h in ("x-amz-checksum-algorithm", "x-amz-checksum-type") if h in headers}
        return 200, echo, xml("InitiateMultipartUploadResult",
                              elements(Bucket=bucket, Key=name, UploadId=upload_id))
    if command == "POST" and upload:
        listed = [(int(part.findtext("{*}PartNumber")), part.findtext("{*}ETag"))
                  for part in ET.fromstring(body).iterfind("{*}Part")]
        if any(upload["parts"].get(n, (0, None))[1] != e for n, e in listed):
            raise Refused("InvalidPart", "One or more of the specified parts could not be found.")
        md5s = b"".join(bytes.fromhex(upload["parts"][n][1].strip('"')) for n, _ in listed)
        etag = '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(listed))  # S3's multipart ETag
        objects[name] = {"data": b"".join(upload["parts"][n][0] for n, _ in listed), "etag": etag,
                         "type": upload["type"], "mtime": time.time(), "checksums": {}}
        del UPLOADS[query["uploadId"]]
        location = "https://%s/%s/%s" % (headers.get("Host", ""), bucket, quote(name))
        return 200, {}, xml("CompleteMultipartUploadResult",
                            elements(Location=location, Bucket=bucket, Key=name, ETag=etag))
    raise Refused("NotImplemented", "Not implemented here: %s %s" % (command, path))


def sts(command, path, query, headers, body, checksums, akid):
    params = dict(query, **dict(parse_qsl(body.decode())))  # the form body or, presigned, the query
    if params.get("Action") != "GetCallerIdentity":
        raise Refused("InvalidAction", "Only GetCallerIdentity is implemented")
    result = elements(Arn="arn:aws:iam::123456789012:user/test", UserId=akid, Account="123456789012")
    inner = "<GetCallerIdentityResult>%s</GetCallerIdentityResult>" % result
    inner += "<ResponseMetadata>%s</ResponseMetadata>" % elements(RequestId=uuid.uuid4())
    return 200, {"Content-Type": "text/xml"}, xml("GetCallerIdentityResponse", inner, STS_NS)


def error_body(service, error):
    inner = elements(Code=error.code, Message=error.message, **error.extra)
    if service == "sts":  # the query protocol wraps its errors, else botocore finds no code
        return xml("ErrorResponse", "<Error>%s</Error>%s" % (inner, elements(RequestId=uuid.uuid4())), STS_NS)
    return xml("Error", inner + elements(RequestId=uuid.uuid4().hex), None)


class Upstream(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive, and makes http.server answer Expect: 100-continue itself.
    protocol_version = "HTTP/1.1"

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():  # botocore's aws-chunked uploads
            parts = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # HTTP trailers, unused
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def handle_any(self):
        raw = self.read_body()  # all of it, even to refuse, so the connection stays in step
        path, _, raw_query = self.path.partition("?")
        pairs = [tuple(unquote(x) for x in p.partition("=")[::2]) for p in raw_query.split("&") if p]
        query = dict(pairs)
        seen = {name.lower(): ",".join(self.headers.get_all(name)) for name in self.headers}
        entry = {"method": self.command, "path": path, "query": raw_query, "service": None, "region": None,
                 "form": "none", "payload": self.headers.get("x-amz-content-sha256"), "verified": False,
                 "error": None, "message": None, "body_sha256": sha256(raw), "headers": seen}
        try:
            body, checksums, akid = verify(self.command, self.headers, path, pairs, raw, entry)
            entry["verified"] = True
            serve = {"s3": s3, "sts": sts}.get(entry["service"])
            if serve is None:
                raise Refused("NotImplemented", "No such service here: %s" % entry["service"])
            with LOCK:  # the stores are shared between the server's threads
                status, headers, out = serve(self.command, path, query, self.headers, body, checksums, akid)
        except Refused as error:
            entry["error"], entry["message"] = error.code, error.message
            status, headers, out = STATUS.get(error.code, 403), {}, error_body(entry["service"], error)
        with LOCK, open(log, "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.send_response(status)
        for name, value in dict({"Content-Type": "application/xml"}, **headers).items():
            self.send_header(name, value)
        if status != 204:  # RFC 9110: a 204 carries no Content-Length
            self.send_header("Content-Length", str(len(out)))
        self.send_header("x-amz-request-id", uuid.uuid4().hex[:16].upper())
        self.end_headers()
        try:
            self.wfile.write(b"" if self.command == "HEAD" else out)
        except (ConnectionError, ssl.SSLError):  # the client hung up; nothing to tell it
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((host, int(port)), Upstream)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
# Handshake in the request's thread, so a stalled client cannot hold up accept().
server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
open(log + ".ready", "w").close()
server.serve_forever()
