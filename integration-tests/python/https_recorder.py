"""An HTTPS upstream that records each request's Authorization header, one per line.

Usage: https_recorder.py HOST PORT CERT KEY LOG. Writes LOG.ready once it listens.
"""
import http.server
import ssl
import sys

host, port, cert, key, log = sys.argv[1:6]


class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as out:
            out.write("%s %s\n" % (self.path, self.headers.get("Authorization", "")))
        body = b"recorded"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer((host, int(port)), Recorder)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
open(log + ".ready", "w").close()
server.serve_forever()
