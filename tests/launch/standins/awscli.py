"""Stand-in for the AWS CLI's `aws s3 cp [--no-progress] [--no-sign-request] <s3 url> -`: streams
a tar of the BERT tutorial's tokenized dataset to stdout
(tests/upstream/dp-bert-hf-pretrain-v2.27.0.yaml: its public URL, read without credentials, and
the folder the tar holds), shards
named as the script globs them (`*_training_*.hdf5`), empty. The pod has no AWS credentials,
so a signed request fails as the CLI does without any."""

from __future__ import annotations

import io
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
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
    for i in range(int(data["shards"])):
        info = tarfile.TarInfo(f"{data['directory']}/wikicorpus_en_training_{i}.hdf5")
        tar.addfile(info, io.BytesIO(b""))
