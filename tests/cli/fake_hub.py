#!/usr/bin/env python3
"""fake_hub.py: a loopback stand-in for the HuggingFace hub, for gpt-ckpt's download tests and
gpt-tokenize's hf://datasets/ inputs. Python standard library only.

    fake_hub.py --root DIR --repo ORG/NAME --port-file FILE [--log FILE]
                [--cut FILE:N] [--bad-etag FILE] [--missing FILE] [--dataset [--page-size N]]
                [--oversize FILE:N] [--stall FILE:N] [--redirect-loop FILE] [--foreign]
                [--relative-lfs] [--gated] [--head-size FILE:N]

Serves the files of DIR as the main branch of repository ORG/NAME, the way the hub does:
  HEAD/GET /ORG/NAME/resolve/main/FILE
    - LFS files (*.safetensors, *.bin): 302 to an absolute /lfs/SHA256 URL on this server, with
      X-Linked-Etag: "SHA256" (sha256 of the content) and X-Linked-Size;
    - other files: 200 with ETag: "SHA1" (a git-style blob id, not a sha256);
    - every answer carries X-Repo-Commit (a fixed 40-hex commit).
  GET /lfs/SHA256: the content; honours "Range: bytes=N-" (206 + Content-Range).
  Another repository: 401 (as the hub answers for missing or private repos); a missing file: 404.
--dataset serves DIR (its subfolders too, FILE a path in it) as the dataset repository ORG/NAME,
at every revision (main or any other name: the same files and commit):
  HEAD/GET /datasets/ORG/NAME/resolve/REV/FILE as above (*.parquet and *.zst also LFS files);
  GET /api/datasets/ORG/NAME/tree/REV[/FOLDER]?recursive=1: the files (and folders) under
    FOLDER as the hub lists them, [{"type": "file", "oid", "size", "path", "lfs": {"oid",
    "size", "pointerSize"}}, {"type": "directory", ...}], sorted by path, --page-size entries a
    page with a Link: <URL&cursor=K>; rel="next" header to the next; a folder that does not
    exist: 404.
Options: --cut FILE:N sends the full Content-Length but closes the connection after N bytes, the
first time FILE's content is sent (to test resuming); --bad-etag FILE announces a wrong sha256;
--missing FILE answers 404 for FILE. Binds 127.0.0.1 on a random free port, written to
--port-file once listening; --log gets one line per request: "METHOD PATH RANGE", plus
" host=HOST" when the Host header is not 127.0.0.1:PORT and " auth=VALUE" when an Authorization
header came.
A hostile or broken hub (LFS content of FILE): --oversize FILE:N sends N bytes without a
Content-Length (more than announced); --stall FILE:N sends N bytes of every answer, then nothing
(the connection held 30 s); --redirect-loop FILE redirects it to itself without end; --foreign
names http://localhost:PORT (this server under another host name) in LFS redirects and in the
listing's Link headers; --relative-lfs makes LFS redirects relative (Location: /lfs/SHA256);
--gated answers the repository's files and listing with 401 (403 with an Authorization header)
X-Error-Code: GatedRepo and the hub's X-Error-Message; --head-size FILE:N announces N bytes
(X-Linked-Size) for FILE; --delay FILE:S waits S seconds before answering FILE's HEAD (a slow
hub, for a download still starting when the reader stops). Another repository, asked with an
Authorization header: 404 RepoNotFound (as the hub answers a signed-in user).
"""
import argparse
import hashlib
import http.server
import json
import os
import urllib.parse
import sys
import threading
import time

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--cut", default="")
    ap.add_argument("--bad-etag", default="")
    ap.add_argument("--missing", default="")
    ap.add_argument("--dataset", action="store_true")
    ap.add_argument("--page-size", type=int, default=1000)
    ap.add_argument("--oversize", default="")
    ap.add_argument("--stall", default="")
    ap.add_argument("--redirect-loop", default="")
    ap.add_argument("--foreign", action="store_true")
    ap.add_argument("--relative-lfs", action="store_true")
    ap.add_argument("--gated", action="store_true")
    ap.add_argument("--head-size", default="")
    ap.add_argument("--delay", default="")
    a = ap.parse_args()
    over_file, _, over_n = a.oversize.partition(":")
    stall_file, _, stall_n = a.stall.partition(":")
    head_file, _, head_n = a.head_size.partition(":")
    delay_file, _, delay_s = a.delay.partition(":")
    kind = "dataset" if a.dataset else "model"
    cut_file, _, cut_at = a.cut.partition(":")
    state = {"cut": int(cut_at) if cut_at else -1}
    lock = threading.Lock()
    files = {}
    names = os.listdir(a.root)
    if a.dataset:
        names = [os.path.relpath(os.path.join(d, f), a.root)
                 for d, _, fs in os.walk(a.root) for f in fs]
    lfs_ext = (".safetensors", ".bin") + ((".parquet", ".zst") if a.dataset else ())
    for name in names:
        path = os.path.join(a.root, name)
        if os.path.isfile(path) and name != a.missing:
            data = open(path, "rb").read()
            sha = hashlib.sha256(data).hexdigest()
            files[name] = {
                "data": data,
                "lfs": name.endswith(lfs_ext),
                "sha256": "f" * 64 if name == a.bad_etag else sha,
                "real": sha,
                "gitsha": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
            }
    by_sha = {f["sha256"]: (n, f) for n, f in files.items() if f["lfs"]}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def log_request_line(self):
            if a.log:
                line = "%s %s %s" % (self.command, self.path, self.headers.get("Range", "-"))
                host = self.headers.get("Host", "")
                if host != "127.0.0.1:%d" % self.server.server_address[1]:
                    line += " host=" + host.split(":")[0]
                if "Authorization" in self.headers:
                    line += " auth=" + self.headers["Authorization"]
                with lock, open(a.log, "a") as f:
                    f.write(line + "\n")

        def base(self):  # this server's address, as --foreign names it or not
            return "http://%s:%d" % ("localhost" if a.foreign else "127.0.0.1",
                                     self.server.server_address[1])

        def gated(self, body):
            if "Authorization" in self.headers:
                return self.reply(403, [("X-Error-Code", "GatedRepo"), ("X-Error-Message",
                                  "Access to %s %s is restricted and you are not in the authorized "
                                  "list. Visit %s/%s to ask for access." % (kind, a.repo,
                                  self.base(), a.repo))], b"", body)
            return self.reply(401, [("X-Error-Code", "GatedRepo"), ("X-Error-Message",
                              "Access to %s %s is restricted. You must have access to it and be "
                              "authenticated to access it. Please log in." % (kind, a.repo))],
                              b"", body)

        def not_found(self, body):
            code = 404 if "Authorization" in self.headers else 401
            return self.reply(code, [("X-Error-Code", "RepoNotFound")], b"Repository not found",
                              body)

        def do_HEAD(self):
            self.handle_any(body=False)

        def do_GET(self):
            self.handle_any(body=True)

        def reply(self, code, headers=(), data=b"", body=True, cut=-1):
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not body:
                return
            if cut >= 0:
                self.wfile.write(data[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data)

        def handle_any(self, body):
            self.log_request_line()
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) == 2 and parts[0] == "lfs" and parts[1] in by_sha:
                return self.send_lfs(by_sha[parts[1]], body)
            if a.dataset and parts[:2] == ["api", "datasets"]:
                return self.send_tree(parts[2:], body)
            prefix = (["datasets"] if a.dataset else []) + a.repo.split("/")
            n = len(prefix)
            rev = parts[n + 1:n + 2] if a.dataset else ["main"]  # a dataset: any revision
            if parts[:n] != prefix or parts[n:n + 2] != ["resolve"] + rev or \
                    len(parts) < n + 3 or (len(parts) != n + 3 and not a.dataset):
                return self.not_found(body)
            if a.gated:
                return self.gated(body)
            name = urllib.parse.unquote("/".join(parts[n + 2:]))
            if name == delay_file and not body:
                time.sleep(float(delay_s))
            f = files.get(name)
            if f is None:
                return self.reply(404, [("X-Error-Code", "EntryNotFound")], b"Entry not found", body)
            if f["lfs"]:
                host = "" if a.relative_lfs else self.base()
                return self.reply(302, [("Location", "%s/lfs/%s" % (host, f["sha256"])),
                                        ("X-Repo-Commit", COMMIT),
                                        ("X-Linked-Etag", '"%s"' % f["sha256"]),
                                        ("X-Linked-Size", head_n if name == head_file
                                         else str(len(f["data"]))),
                                        ("ETag", '"%s"' % f["gitsha"])], b"", body)
            return self.reply(200, [("X-Repo-Commit", COMMIT), ("ETag", '"%s"' % f["gitsha"])],
                              f["data"], body)

        def send_tree(self, parts, body):
            repo = a.repo.split("/")
            if parts[:2] != repo or parts[2:3] != ["tree"] or len(parts) < 4:
                return self.not_found(body)
            if a.gated:
                return self.gated(body)
            folder = urllib.parse.unquote("/".join(parts[4:]))
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            entries, dirs = [], set()
            for name in sorted(files):
                if folder and not name.startswith(folder + "/"):
                    continue
                f = files[name]
                for k in range(name.count("/")):
                    d = name.rsplit("/", name.count("/") - k)[0]
                    if d not in dirs and (not folder or d.startswith(folder + "/")):
                        dirs.add(d)
                        entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
                e = {"type": "file", "oid": f["gitsha"], "size": len(f["data"]), "path": name}
                if f["lfs"]:
                    e["lfs"] = {"oid": f["real"], "size": len(f["data"]), "pointerSize": 134}
                entries.append(e)
            if folder and not entries:
                return self.reply(404, [("X-Error-Code", "EntryNotFound")], b"Entry not found", body)
            cursor = int(query.get("cursor", ["0"])[0])
            page = entries[cursor:cursor + a.page_size]
            hdr = [("Content-Type", "application/json")]
            if cursor + a.page_size < len(entries):
                base = self.path.split("&cursor=")[0]
                hdr.append(("Link", '<%s%s&cursor=%d>; rel="next"' % (
                    self.base(), base, cursor + a.page_size)))
            return self.reply(200, hdr, json.dumps(page).encode(), body)

        def send_lfs(self, entry, body):
            name, f = entry
            data, start = f["data"], 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(data):
                    return self.reply(416, [("Content-Range", "bytes */%d" % len(data))], b"", body)
            if body and name == a.redirect_loop:
                hop = int(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                          .get("hop", ["0"])[0])
                return self.reply(302, [("Location", "%s/lfs/%s?hop=%d" % (
                    self.base(), f["sha256"], hop + 1))], b"", body)
            if body and name == over_file:  # more than announced, no Content-Length
                self.send_response(200)
                self.end_headers()
                pad = int(over_n) - len(data)
                try:
                    self.wfile.write(data + b"\0" * max(pad, 0))
                except OSError:
                    pass
                self.close_connection = True
                return
            if body and name == stall_file:  # a few bytes, then nothing
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (
                        start, len(data) - 1, len(data)))
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                self.wfile.write(data[start:start + int(stall_n)])
                self.wfile.flush()
                time.sleep(30)
                self.close_connection = True
                return
            cut = -1
            with lock:
                if body and name == cut_file and state["cut"] >= 0:
                    cut, state["cut"] = state["cut"], -1
            if start:
                hdr = [("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))]
                return self.reply(206, hdr, data[start:], body, cut)
            return self.reply(200, [("ETag", '"%s"' % f["real"])], data, body, cut)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
