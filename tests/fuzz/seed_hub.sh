#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/hub: header blocks of HEAD answers as the hub sends them (what
# tests/cli/fake_hub.py serves): an LFS file (X-Linked-Etag = sha256, X-Linked-Size), a plain
# file (ETag of a git blob, Content-Length), a relative redirect of a renamed repo followed by the
# answer, a redirect to the CDN, a relative redirect to an LFS file (the commit and X-Linked-*
# headers of the first answer count), a weak ETag, a 404, a 401, a gated 403 with the hub's
# message; and repo ids.
# Usage: tests/fuzz/seed_hub.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/fuzz/corpus/hub
rm -rf "$out" && mkdir -p "$out" && cd "$out"
sha=4c8a0e8c7e2f7a3c1b0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b
commit=0123456789abcdef0123456789abcdef01234567
printf 'HTTP/1.1 302 Found\r\nLocation: https://cdn-lfs.huggingface.co/repos/x/y\r\nX-Repo-Commit: %s\r\nX-Linked-Etag: "%s"\r\nX-Linked-Size: 147112\r\nETag: "abc"\r\nContent-Length: 1125\r\n\r\n' \
  "$commit" "$sha" > lfs.txt
printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Repo-Commit: %s\r\nETag: "8a2d3c9f0e1b2a3c4d5e6f708192a3b4c5d6e7f8"\r\ncontent-length: 755\r\n\r\n' \
  "$commit" > plain.txt
printf 'HTTP/1.1 307 Temporary Redirect\r\nLocation: /new-org/model/resolve/main/config.json\r\nX-Repo-Commit: %s\r\n\r\nHTTP/1.1 200 OK\r\nX-Repo-Commit: %s\r\nETag: "feedbeef"\r\nContent-Length: 12\r\n\r\n' \
  "$commit" "$commit" > renamed.txt
printf 'HTTP/2 200\r\netag: W/"weak-1.2"\r\nx-linked-size: 0\r\n\r\n' > weak.txt
printf 'HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound\r\nContent-Length: 0\r\n\r\n' > missing.txt
printf 'HTTP/1.1 401 Unauthorized\r\nX-Error-Code: RepoNotFound\r\n\r\n' > gated.txt
printf 'HTTP/1.1 403 Forbidden\r\nX-Error-Code: GatedRepo\r\nX-Error-Message: Access to model o/n is restricted and you are not in the authorized list.\r\n\r\n' > gated_msg.txt
printf 'HTTP/1.1 302 Found\r\nLocation: /lfs/%s\r\nX-Repo-Commit: %s\r\nX-Linked-Etag: "%s"\r\nX-Linked-Size: 147112\r\n\r\nHTTP/1.1 200 OK\r\nETag: "%s"\r\nContent-Length: 147112\r\n\r\n' \
  "$sha" "$commit" "$sha" "$sha" > lfs_relative.txt
printf 'openai-community/gpt2-medium' > repo.txt
printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLink: <https://huggingface.co/api/datasets/o/n/tree/main/data?recursive=1&cursor=ZXlKbWFX>; rel="next"\r\n\r\n' > link.txt
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
