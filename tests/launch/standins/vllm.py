"""Stand-in for `vllm serve` of the image's vLLM (job facts "vllm": tests/upstream/vllm-v0.24.0.yaml
or vllm-v0.16.0.yaml, the options its parser takes; "vllmLoader": how its default loader finds
weights): parses its argv as vLLM's argparse would (an unknown option, a missing value or a
malformed number is an error, exit 2), then does what the server needs before it answers:

- offline: HF_HUB_OFFLINE set (the pod has no egress; the model is on /shared);
- the model: a directory, or a Hub id read from the Hub cache offline (HF_HUB_CACHE, at
  --revision), holding config.json, weights by the loader's patterns (else vLLM's "Cannot find
  any model weights"), and a tokenizer;
- the accelerators: the node's driver against the image's runtime (_common.accelerator_init),
  and --tensor-parallel-size within the devices the pod was given (/dev/nvidia*, or /dev/neuron*
  times the logical NeuronCores of one device, job facts "servingCoresPerDevice");
- its caches: ~/.cache/vllm writable, and NEURON_COMPILED_ARTIFACTS when set;

with --nnodes N > 1 (vLLM's multi-node launch with the mp backend, "multi_node" facts): the
world (tensor x pipeline parallel) divisible by N and --node-rank below it; a --headless node of
rank > 0 connects to --master-addr:--master-port (retrying, as torch's TCPStore client does,
until the job facts' "joinSeconds") and stays up; the node of rank 0 listens there and waits as
long for the N - 1 others (else torch's "Timed out after ... waiting for clients"), and only then
serves on --host:--port: GET /health (200), GET /metrics (the Prometheus series of its vLLM,
job facts "vllmSeries") and POST /v1/completions for the name of --served-model-name (a
completion; another name: vLLM's 404 error body).

On a Neuron node (job facts "neuronPlugin", tests/upstream/vllm-neuron-compile-cache.yaml) the
plugin's compile cache before it serves: vLLM Neuron 0.24 keys torch.compile's graphs by the
configuration under `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>`, NxD Inference loads whatever
NEURON_COMPILED_ARTIFACTS holds; each compiles (and writes the artifacts) where they are absent
and loads them where present, recording which ("vllm-neuron-cache"). SIGTERM is uvicorn's
graceful shutdown (vLLM's API server runs uvicorn): the listener is closed, requests in flight
are answered, the process exits 0; no other signal is handled (a pod's first process ignores
the rest until SIGKILL).
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import _hub
from _common import accelerator_init, fail, job, record

TOKENIZER_FILES = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("vocab.txt",))
"""Any of these sets is a tokenizer transformers' AutoTokenizer loads (fast, sentencepiece, BPE, WordPiece)."""
SPECIAL_TOKEN_IDS = ("bos_token_id", "eos_token_id")
HUMAN_INT = re.compile(r"^\d+(\.\d+)?[kKmMgG]?$")  # vLLM's human_readable_int: 4096, 4k, 1.5M
INTEGER = (
    "--port",
    "--tensor-parallel-size",
    "--max-num-seqs",
    "--pipeline-parallel-size",
    "--seed",
    "--nnodes",
    "--node-rank",
    "--master-port",
)


def human_int(text: str) -> str:
    if not HUMAN_INT.match(text):
        raise argparse.ArgumentTypeError(f"invalid human_readable_int value: {text!r}")
    return text


def parse(facts: dict) -> argparse.Namespace:
    if sys.argv[1:2] != ["serve"]:
        fail(f"vllm: only `vllm serve` is modelled here, not {sys.argv[1:2]}", 2)
    p = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=False)
    p.add_argument(facts["positional"][0], nargs="?")
    for option in facts["options"]:
        if option in INTEGER:
            p.add_argument(option, type=int)
        elif option == "--max-model-len":
            p.add_argument(option, type=human_int)
        elif option == "--dtype":
            p.add_argument(option, choices=facts["dtype_choices"])
        else:  # a value or a flag: what the stand-in does not read is taken as either
            p.add_argument(option, nargs="?", const=True)
    a = p.parse_args(sys.argv[2:])
    a.model = getattr(a, facts["positional"][0]) or a.model
    if not a.model:
        p.error("the model (model_tag or --model) is required")
    return a


def model_dir(a: argparse.Namespace) -> Path:
    """The model's folder: a directory, or a Hub id's snapshot in the cache (offline)."""
    if a.model.startswith("/"):
        if not Path(a.model).is_dir():
            fail(f"OSError: {a.model} is not a directory (the model folder is missing)")
        return Path(a.model)
    revision = a.revision if isinstance(a.revision, str) else "main"
    try:
        config = _hub.cached_file(a.model, "config.json", revision=revision)
    except OSError as e:
        fail(f"OSError: {e}")
    assert config is not None
    return config.parent


def check_model(a: argparse.Namespace, folder: Path, loader: dict) -> list[str]:
    """config.json, the weights the default loader finds (its patterns in order), a tokenizer."""
    if not (folder / "config.json").is_file():
        fail(f"OSError: {a.model} does not appear to have a file named config.json.")
    config = json.loads((folder / "config.json").read_text())
    # A converted folder (a path, not a Hub id) must say where generation stops: without the ids,
    # transformers' LlamaConfig fills bos 1 / eos 2 (v4.44.0) and vLLM stops at token id 2.
    missing = [k for k in SPECIAL_TOKEN_IDS if a.model.startswith("/") and config.get(k) is None]
    if missing:
        fail(f"ValueError: {a.model}/config.json has no {' or '.join(missing)}: the training tokenizer's ids are lost")
    weights: list[str] = []
    for pattern in loader["allow_patterns"]:
        weights = glob.glob(str(folder / pattern))
        if weights:
            break
    if not weights:
        fail(f"RuntimeError: {loader['no_weights_error'].format(model=a.model)}")
    if not any(all((folder / f).is_file() for f in files) for files in TOKENIZER_FILES):
        fail(f"OSError: Can't load tokenizer for '{a.model}': no tokenizer files in {folder}")
    return sorted(Path(w).name for w in weights)


def check_devices(a: argparse.Namespace, facts: dict) -> None:
    tp = a.tensor_parallel_size or 1
    gpus, neuron = glob.glob("/dev/nvidia[0-9]*"), glob.glob("/dev/neuron[0-9]*")
    have = len(gpus) if gpus else len(neuron) * int(facts.get("servingCoresPerDevice") or 0)
    if tp > have:
        fail(f"ValueError: tensor_parallel_size ({tp}) is larger than the {have} devices (cores) of this pod")


def writable(path: str) -> None:
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / f".probe-{os.getpid()}").write_text("")
        (Path(path) / f".probe-{os.getpid()}").unlink()
    except OSError as e:
        fail(f"OSError: {path} is not writable: {e}")


def neuron_compile(a: argparse.Namespace, facts: dict) -> None:
    """The Neuron plugin's compiled graphs: loaded where its cache holds them, else compiled there."""
    plugin = facts.get("neuronPlugin")
    if not plugin or not glob.glob("/dev/neuron[0-9]*"):
        return
    if "cache_root_env" in plugin:  # vLLM Neuron 0.24: torch.compile's cache, keyed by graph and config
        root = os.environ.get(plugin["cache_root_env"]) or os.path.expanduser(plugin["cache_root_default"])
        config = [a.model, a.revision, a.tensor_parallel_size, a.max_model_len, a.max_num_seqs, a.dtype]
        key = hashlib.sha256(json.dumps(config, default=str).encode()).hexdigest()[:16]
        folder = Path(root) / plugin["compile_cache_under_root"] / key
    else:  # NxD Inference: the artifacts folder as it is, whatever the configuration
        default = Path(plugin["writes_relative_to_working_directory"]) / a.model / "neuron-compiled-artifacts"
        folder = Path(os.environ.get(plugin["artifacts_env"]) or default)
    artifact = folder / "model.neff"
    folder.mkdir(parents=True, exist_ok=True)
    # One process compiles, another waits for it (the plugins' lock; the wait is bounded by
    # NEURON_LIBTORCH_COMPILATION_TIMEOUT, not played) and then loads what it wrote.
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        compiled = not artifact.is_file()
        if compiled:
            print(f"INFO: no compiled graphs in {folder}: compiling", flush=True)
            time.sleep(float(facts.get("compileSeconds", 0)))
            partial = folder / f".model.neff.{os.getpid()}"  # whole or absent for a reader
            partial.write_text(json.dumps({"tp": a.tensor_parallel_size, "maxModelLen": a.max_model_len}))
            partial.rename(artifact)
        else:
            print(f"INFO: loading compiled graphs from {folder}", flush=True)
    record("vllm-neuron-cache", folder=str(folder), compiled=compiled)


def join_group(a: argparse.Namespace, facts: dict) -> list[socket.socket]:
    """The rendezvous of a multi-node group; the leader's open connections to its workers."""
    nnodes, rank = a.nnodes or 1, a.node_rank or 0
    if nnodes == 1:
        return []
    world = (a.tensor_parallel_size or 1) * (a.pipeline_parallel_size or 1)
    if world % nnodes or rank >= nnodes:
        fail(f"ValueError: world size {world} over {nnodes} nodes with node_rank {rank} is not a valid layout")
    port = a.master_port or int(facts["vllm"]["multi_node"]["master_port_default"])
    addr = a.master_addr if isinstance(a.master_addr, str) else "127.0.0.1"
    deadline = time.monotonic() + float(facts.get("joinSeconds", 60))
    if (rank > 0) != (a.headless is True):
        fail(f"vllm: a node of rank {rank} {'without' if rank else 'with'} --headless is not modelled")
    if rank > 0:
        warned = False
        while True:
            try:
                conn = socket.create_connection((addr, port), timeout=2)
                conn.sendall(f"{rank}\n".encode())
                record("vllm-worker", rank=rank, master=f"{addr}:{port}")
                print(f"INFO: node {rank} joined {addr}:{port}", flush=True)
                return [conn]
            except OSError as e:
                if not warned:  # torch's client warns on its first failed attempt, then retries
                    print(f"[W socket] The client socket has failed to connect to {addr}:{port}: {e}", flush=True)
                    warned = True
                if time.monotonic() > deadline:
                    fail(
                        f"torch.distributed.DistNetworkError: The client socket has failed to connect to {addr}:{port}: {e}"
                    )
                time.sleep(0.5)
    listener = socket.create_server(("0.0.0.0", port))
    joined: dict[int, socket.socket] = {}
    while len(joined) < nnodes - 1:
        listener.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            conn, _ = listener.accept()
            conn.settimeout(5)
            joined[int(conn.makefile().readline())] = conn
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                fail(
                    f"torch.distributed.DistStoreError: Timed out after {facts.get('joinSeconds', 60)} seconds "
                    f"waiting for clients. {len(joined) + 1}/{nnodes} clients joined."
                )
    print(f"INFO: all {nnodes} nodes joined on port {port}", flush=True)
    return list(joined.values())


def exposition(served: str) -> str:
    """/metrics as prometheus_client writes it: every series of the image's vLLM (job facts
    "vllmSeries", its PrometheusStatLogger's) with its labels, a counter's sample with `_total`, a
    histogram's as `_bucket`, `_count` and `_sum`."""
    facts = job()["vllmSeries"]
    labels = ",".join(f'{k}="{served if k == "model_name" else "0"}"' for k in facts["labelnames"])
    samples = {"gauge": ("",), "counter": (facts["counter_sample_suffix"],), "histogram": ("_count", "_sum")}
    lines = []
    for name, kind in sorted(facts["series"].items()):
        lines.append(f"# TYPE {name} {kind}")
        if kind == "histogram":
            lines.append(f'{name}_bucket{{{labels},le="+Inf"}} 0.0')
        lines += [f"{name}{suffix}{{{labels}}} 0.0" for suffix in samples[kind]]
    return "\n".join(lines) + "\n"


def handler(served: str, max_len: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            print(f'INFO:     {self.client_address[0]} - "{format % args}"', flush=True)

        def _send(self, status: int, doc: dict | None) -> None:
            body = json.dumps(doc).encode() if doc is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == job()["vllm"]["metrics_path"]:
                body = exposition(served).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self._send(200, None) if self.path == job()["vllm"]["health_path"] else self._send(
                404, {"detail": "Not Found"}
            )

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._send(404, {"detail": "Not Found"})
                return
            doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if doc.get("model") != served:
                message = f"The model `{doc.get('model')}` does not exist."
                self._send(404, {"error": {"message": message, "type": "NotFoundError", "code": 404}})
                return
            tokens = int(doc.get("max_tokens") or 16)
            text = " ok" * min(tokens, max_len)
            choice = {"index": 0, "text": text, "finish_reason": "length"}
            usage = {"prompt_tokens": len(str(doc.get("prompt", "")).split()), "completion_tokens": tokens}
            self._send(
                200,
                {
                    "id": f"cmpl-{time.monotonic_ns()}",
                    "object": "text_completion",
                    "model": served,
                    "choices": [choice],
                    "usage": usage,
                },
            )

    return Handler


def main() -> None:
    facts = job()
    a = parse(facts["vllm"])
    offline = _hub.offline()
    record("vllm", args={k: v for k, v in vars(a).items() if v is not None}, offline=offline)
    if not offline:
        fail("the server is not offline (HF_HUB_OFFLINE unset): it would call the Hub, which its pod cannot reach")
    accelerator_init()
    check_devices(a, facts)
    folder = model_dir(a)
    weights = check_model(a, folder, facts["vllmLoader"])
    writable(os.path.join(os.path.expanduser("~"), ".cache", "vllm"))
    if os.environ.get("NEURON_COMPILED_ARTIFACTS"):
        writable(os.environ["NEURON_COMPILED_ARTIFACTS"])
    neuron_compile(a, facts)
    group = join_group(a, facts)
    if group and a.headless is True:  # a worker serves no HTTP: it runs its ranks until the group ends
        group[0].settimeout(None)
        group[0].recv(1)
        fail("vllm: the leader closed the group's connection")
    served = a.served_model_name if isinstance(a.served_model_name, str) else a.model
    # What it read: a link (a followed run's `-served`) is resolved once, at load; the weights stay in memory.
    loaded = str(folder.resolve())
    record("vllm-loaded", modelDir=str(folder), resolved=loaded, weights=weights, served=served, nodes=len(group) + 1)
    port = a.port or int(facts["vllm"]["default_port"])
    host = a.host if isinstance(a.host, str) else "0.0.0.0"
    server = ThreadingHTTPServer(
        (host, port), handler(served, int(float(str(a.max_model_len or 4096).rstrip("kKmMgG"))))
    )
    server.daemon_threads = False  # a request in flight is answered before the process exits
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)", flush=True)
    server.serve_forever()
    server.server_close()  # the listener closed; joins the requests in flight (block_on_close)
    print("INFO:     Shutting down", flush=True)
    record("vllm-stopped", served=served)


if __name__ == "__main__":
    main()
