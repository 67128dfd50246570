#!/usr/bin/env python3
"""A local S3 server for the tests of common/s3 (tests/unit/test_s3_server.c, test_s3_faults.c,
tests/cli/*_s3.sh): moto's server (PyPI: moto[server]) on 127.0.0.1 at a free port, with request
signing enforced (an IAM user whose access key may do anything on s3, so that a wrong secret is
refused as AWS refuses it, and a role's temporary credentials with a session token), reached
only through two proxies in front of it: a checking one, and a fault-injecting one that checks
as well.

Usage: s3_server.py READYFILE
Writes "PORT PROXYPORT KEYID SECRET TEMPKEYID TEMPSECRET SESSIONTOKEN MOTOPORT" into READYFILE
once all listen (buckets "gk-test" and "gk-other" exist), then serves until its standard input
reaches EOF (the test holds a pipe) or it is killed. PORT is the checking proxy: what the tests
call the server. Exits 77 with a line on stderr when moto is not importable.

Both proxies check what moto does not: a request whose x-amz-content-sha256 is a hex SHA-256
other than its body's gets S3's answer, 400 XAmzContentSHA256Mismatch (UNSIGNED-PAYLOAD and
STREAMING-* pass), and a signed request without that header 400 InvalidRequest; so a client that
signs the wrong hash fails the tests as it would fail on AWS.

The proxies forward requests as they come (Host kept, so signatures stay valid). The fault proxy
answers control requests itself (GET ones answered on their own connection too):
  POST /__fault?what=W&n=N[&ranged=1][&p=P&seed=S][&secs=T]
                             the next N requests (control requests aside; with ranged=1 only
                             those with a Range header that does not start at byte 0: reads of
                             data windows, not of shard headers) get fault W, each with
                             probability P (default 1; drawn from a generator seeded with S, so
                             that a single-threaded client sees the same faults every run); with
                             secs=T every request for the next T seconds gets it (a storm).
                             W: 503 (an S3 SlowDown error, not forwarded), 500 (InternalError),
                             region (400 AuthorizationHeaderMalformed naming eu-west-1),
                             reset (the connection closed without an answer, RST),
                             stall (forwarded; headers and half the body, then 4 s of nothing),
                             drop (forwarded; the answer's headers and half its body, then the
                             connection closed). n=0 ends any fault.
  GET /__count               the number of requests forwarded or faulted so far, as text
  GET /__conns               the number of connections accepted so far (control ones included)
  GET /__last                "HOST PATH" of the last request forwarded or faulted
"""
import hashlib
import http.client
import http.server
import json
import logging
import os
import random
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"  # every request to moto is authenticated
try:
    from moto.iam.models import iam_backends
    from moto.s3.models import s3_backends
    from moto.sts.models import sts_backends
    from moto.server import ThreadedMotoServer
except ImportError as exc:
    print(f"moto is not installed (pip install 'moto[server]'): {exc}", file=sys.stderr)
    sys.exit(77)

ACCOUNT = "123456789012"


def canonical_query_fix():
    """moto 5.2.1 checks a signature on the request's URL as werkzeug rebuilt it, whose query has
    '/' decoded, and botocore takes the query as it finds it: a listing whose prefix holds '/'
    (sent as %2F, as AWS wants it and boto3 does it) was refused, boto3's as well as gptkit's.
    Each name and value of the query is percent-encoded again as SigV4 says before the check."""
    from urllib.parse import quote, unquote

    from moto.iam import access_control
    make = access_control.IAMRequestBase._create_aws_request

    def create(self):
        request = make(self)
        base, sep, query = request.url.partition("?")
        if sep:
            parts = [p.partition("=") for p in query.split("&")]
            request.url = base + "?" + "&".join(
                quote(unquote(k), safe="-_.~") + e + quote(unquote(v), safe="-_.~") for k, e, v in parts)
        return request

    access_control.IAMRequestBase._create_aws_request = create


def make_user():
    """The IAM user's key and secret, and temporary credentials (key, secret, session token) of
    a role assumed through STS; both may do anything on s3."""
    iam = iam_backends[ACCOUNT]["aws"]
    iam.create_user(region_name="us-east-1", user_name="gk")
    policy = json.dumps({"Version": "2012-10-17",
                         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
    iam.put_user_policy("gk", "all-s3", policy)
    key = iam.create_access_key("gk")
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                                "Principal": {"AWS": "*"}}]})
    iam.create_role(role_name="gk-role", assume_role_policy_document=trust, path="/", permissions_boundary=None,
                    description="", tags=[], max_session_duration=None)
    iam.put_role_policy("gk-role", "all-s3", policy)
    role = sts_backends[ACCOUNT]["aws"].assume_role(
        region_name="us-east-1", role_session_name="gk-test", policy=None, duration=3600, external_id=None,
        role_arn=f"arn:aws:iam::{ACCOUNT}:role/gk-role")
    s3 = s3_backends[ACCOUNT]["aws"]
    for b in ("gk-test", "gk-other"):
        s3.create_bucket(b, "us-east-1")
    return (key.access_key_id, key.secret_access_key, role.access_key_id, role.secret_access_key,
            role.session_token)


class Faults:
    lock = threading.Lock()
    what = ""
    left = 0
    ranged = False
    until = 0.0  # a storm: every request gets the fault until this time.monotonic()
    p = 1.0  # each of the next left requests gets it with this probability ...
    rng = random.Random(0)  # ... drawn from this (seeded: the same draws run after run)
    count = 0
    conns = 0
    last = ""

    @classmethod
    def set(cls, q):
        with cls.lock:
            cls.what, cls.left = q["what"][0], int(q.get("n", ["0"])[0])
            cls.ranged = q.get("ranged", ["0"])[0] == "1"
            cls.until = time.monotonic() + float(q.get("secs", ["0"])[0])
            cls.p = float(q.get("p", ["1"])[0])
            cls.rng = random.Random(int(q.get("seed", ["0"])[0]))

    @classmethod
    def take(cls, host, path, rng):
        with cls.lock:
            cls.count += 1
            cls.last = f"{host} {path}"
            if time.monotonic() < cls.until:
                return cls.what
            if cls.left > 0 and (not cls.ranged or (rng and not rng.startswith("bytes=0-"))):
                cls.left -= 1
                if cls.p >= 1 or cls.rng.random() < cls.p:
                    return cls.what
            return ""


def sha256_mismatch(headers, body):
    """S3's answer (400 XAmzContentSHA256Mismatch) when x-amz-content-sha256 is a hex SHA-256
    that is not the body's; UNSIGNED-PAYLOAD (and STREAMING-*) pass. A signed request without
    the header is refused as S3 refuses it. None when the request may go on."""
    claimed = headers.get("x-amz-content-sha256")
    if claimed is None:
        if (headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256"):
            return ("InvalidRequest", "Missing required header for this request: x-amz-content-sha256", "")
        return None
    if len(claimed) != 64 or any(c not in "0123456789abcdefABCDEF" for c in claimed):
        return None
    actual = hashlib.sha256(body or b"").hexdigest()
    if claimed.lower() == actual:
        return None
    return ("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was "
            "computed.", f"<ClientComputedContentSHA256>{claimed}</ClientComputedContentSHA256>"
            f"<S3ComputedContentSHA256>{actual}</S3ComputedContentSHA256>")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = 0
    inject = True  # the fault proxy; the checking one (Checker) neither injects nor counts

    def log_message(self, *args):
        pass

    def handle(self):
        if self.inject:
            with Faults.lock:
                Faults.conns += 1
        super().handle()

    def reply(self, status, body, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":  # HEAD's answer has none, or a kept connection reads it next
            self.wfile.write(body)

    def control(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/__count":
            self.reply(200, str(Faults.count).encode())
            return True
        if u.path == "/__conns":
            self.reply(200, str(Faults.conns).encode())
            return True
        if u.path == "/__last":
            self.reply(200, Faults.last.encode())
            return True
        if u.path == "/__fault":
            Faults.set(urllib.parse.parse_qs(u.query))
            self.reply(200, b"ok")
            return True
        return False

    def forward(self):
        if self.inject and self.control():
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        fault = Faults.take(self.headers.get("Host", ""), self.path, self.headers.get("Range")) if self.inject else ""
        if fault in ("503", "500"):
            code = "SlowDown" if fault == "503" else "InternalError"
            xml = f"<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>injected</Message></Error>"
            self.reply(int(fault), xml.encode(), "application/xml")
            return
        if fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if fault == "region":
            xml = ("<?xml version=\"1.0\"?><Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
                   "'us-east-1' is wrong; expecting 'eu-west-1'</Message><Region>eu-west-1</Region></Error>")
            self.reply(400, xml.encode(), "application/xml")
            return
        bad = sha256_mismatch(self.headers, body)
        if bad:
            xml = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{bad[0]}</Code><Message>{bad[1]}"
                   f"</Message>{bad[2]}<RequestId>0</RequestId></Error>")
            self.reply(400, xml.encode(), "application/xml")
            return
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=60)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        r = conn.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        length = r.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if fault in ("drop", "stall") and self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            if fault == "stall":
                time.sleep(4)
            self.close_connection = True
            return
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class Checker(Proxy):
    inject = False


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that went away (after a dropped answer)


def main():
    ready = sys.argv[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    creds = make_user()
    canonical_query_fix()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    Proxy.upstream = moto.get_host_and_port()[1]
    proxy = ThreadingServer(("127.0.0.1", 0), Proxy)
    checker = ThreadingServer(("127.0.0.1", 0), Checker)
    for server in (proxy, checker):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(ready + ".tmp", "w") as f:
        f.write(f"{checker.server_address[1]} {proxy.server_address[1]} {' '.join(creds)} {Proxy.upstream}\n")
    os.rename(ready + ".tmp", ready)
    sys.stdin.read()  # until the test closes its end (or dies)
    proxy.shutdown()
    checker.shutdown()
    moto.stop()


if __name__ == "__main__":
    main()
