"""Stand-in for the AWS CLI's `aws s3 cp [--no-progress] [--no-sign-request] <s3 url> -`: streams
a tar of the BERT tutorial's tokenized dataset to stdout
(tests/upstream/dp-bert-hf-pretrain-v2.27.0.yaml: its public URL, read without credentials, and
the folder the tar holds), shards
named as the script globs them (`*_training_*.hdf5`), empty. The pod has no AWS credentials,
so a signed request fails as the CLI does without any. The object is fetched from S3 first
(the stand-in internet's s3.amazonaws.com, port 443): a pod without egress fails as the CLI
does when it cannot connect."""

from __future__ import annotations

import io
import socket
import sys
import tarfile

from _common import fail, job, record

args = sys.argv[1:]
if args[:2] != ["s3", "cp"] or args[-1] != "-":
    fail(f"aws stand-in: only `aws s3 cp ... <s3 url> -` is modelled, not {args}", 252)
record("aws", args=args)
data = job()["bertDataset"]
url = args[-2]
if data["unsigned"] and "--no-sign-request" not in args:
    fail("fatal error: Unable to locate credentials")
if url != data["download"]:
    fail(f"fatal error: An error occurred (404) when calling the HeadObject operation: Key not found ({url})")
try:
    with socket.create_connection(("s3.amazonaws.com", 443), timeout=3) as s:
        s.sendall(f"GET /{url.removeprefix('s3://')} HTTP/1.0\r\nHost: s3.amazonaws.com\r\n\r\n".encode())
        status = s.recv(64).split()[1]
except OSError:
    fail('fatal error: Could not connect to the endpoint URL: "https://s3.amazonaws.com/"')
if status != b"200":
    fail(f"fatal error: An error occurred ({status.decode()}) when calling the GetObject operation")
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
    for i in range(int(data["shards"])):
        info = tarfile.TarInfo(f"{data['directory']}/wikicorpus_en_training_{i}.hdf5")
        tar.addfile(info, io.BytesIO(b""))
