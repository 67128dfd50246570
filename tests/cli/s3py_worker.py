#!/usr/bin/env python3
"""s3.bash's s3py, one process for a whole test (boto3 imported once, not at every call).

Usage: s3py_worker.py PORT KEY SECRET DIR
Serves calls until its standard input reaches EOF: for each line on stdin it runs the Python code
in DIR/code with sys.argv = [code] + the NUL-separated words of DIR/args, in a namespace with s3 (a
boto3 client of the server at 127.0.0.1:PORT) and keys(BUCKET), its stdout and stderr going to
DIR/stdout and DIR/stderr, and then writes the exit status a `python3 -` run of it would have
(0; 1 for an exception, whose traceback goes to DIR/stderr; sys.exit's) as one line to stdout.
"""
import os
import sys
import traceback

import boto3

port, key, secret, work = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%s" % port, region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
reply = sys.stdout


def keys(b):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])]


def exit_status(code):
    """What `python3 -` exits with after sys.exit(code), printing a string code as it does."""
    if code is None or code is False:
        return 0
    if code is True:
        return 1
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run(code, argv):
    sys.argv = ["-"] + argv
    env = {"__name__": "__main__", "sys": sys, "s3": s3, "keys": keys}
    try:
        exec(compile(code, "<s3py>", "exec"), env)
        return 0
    except SystemExit as e:
        return exit_status(e.code)
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        return 1


for _ in sys.stdin:
    with open(os.path.join(work, "code"), encoding="utf-8") as f:
        code = f.read()
    with open(os.path.join(work, "args"), "rb") as f:
        argv = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0")[:-1]]
    with open(os.path.join(work, "stdout"), "w", encoding="utf-8") as out, \
            open(os.path.join(work, "stderr"), "w", encoding="utf-8") as err:
        sys.stdout, sys.stderr = out, err
        status = run(code, argv)
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    reply.write("%d\n" % status)
    reply.flush()
