"""An S3-compatible server on loopback for the tests: moto in server mode.

Starts moto on 127.0.0.1 (a free port), creates the buckets named on the command line, prints
one line `listening on http://127.0.0.1:PORT`, and serves until its standard input closes (the
test that started it exited or dropped it) or it gets SIGTERM.

    python python/s3_server.py lake-test [more buckets...]

Why moto: it installs from PyPI with no service to run, it answers the S3 REST calls the lake
makes (PUT, GET with ranges, HEAD, LIST v2, DELETE, copy, multipart uploads) and it honours
the conditional create (`If-None-Match: *` answered with 412) that the lake's commits rely on.
MinIO would be more faithful but is not available from the package registries this project
can use.
"""

import logging
import signal
import sys

import boto3
from moto.server import ThreadedMotoServer


def start(buckets, key="test"):
    """Starts moto on 127.0.0.1 (a free port) with `buckets` created, requests not logged.

    Returns (server, endpoint URL, boto3 client); stop it with `server.stop()`.
    """
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=key,
        region_name="us-east-1",
    )
    for bucket in buckets:
        client.create_bucket(Bucket=bucket)
    return server, endpoint, client


def main() -> int:
    server, endpoint, _ = start(sys.argv[1:] or ["lake-test"])
    print(f"listening on {endpoint}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # Serve until the parent closes our stdin.
        while sys.stdin.read(1):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
