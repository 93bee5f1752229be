"""What each program a recipe runs needs at run time, read from its source at the pinned version:
the network endpoints it contacts, the Hugging Face Hub files it reads (and how it reads them
offline), whether it initialises the Neuron runtime or CUDA (so the node's driver must fit the
image), whether it starts daemons on other hosts (MPI), the ports it binds.

The builders derive what they stage and set from these (workloads/manifests/hub.py); the tests
hold every rendered pod of every example stack to them (tests/plan/test_runtime_needs.py) and the
values to their upstream files (tests/unit/test_needs.py). A new kind of need is a new field of
`Program` plus its check in the plan test, which fails for a field without one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """A host a program opens connections to."""

    host: str
    port: int
    why: str
    optional: bool = False
    """The program goes on without it (a fallback in its code)."""


HUB = Endpoint("huggingface.co", 443, "Hugging Face Hub: repository listing and file downloads (HF_ENDPOINT)")
S3 = Endpoint("s3.amazonaws.com", 443, "S3 (through the VPC's gateway endpoint, S3's public addresses)")
IMDS = Endpoint(
    "169.254.169.254", 80, "EC2 instance metadata: the instance type for a log directory name", optional=True
)


@dataclass(frozen=True)
class HubRepo:
    """Files a program reads from a Hub model repository through from_pretrained."""

    repo: str
    files: tuple[str, ...]
    """Read and required: without them the program fails."""
    optional: tuple[str, ...] = ()
    """Read when the repository has them."""
    revision: str = "main"

    @property
    def patterns(self) -> tuple[str, ...]:
        return (*self.files, *self.optional)


@dataclass(frozen=True)
class HubCli:
    """How an image's huggingface-hub downloads a repository from the command line
    (tests/upstream/huggingface-hub-cli.yaml): its program, and how it takes several patterns."""

    program: str
    include_each: bool
    """One pattern per `--include` (hub 1.x: typer's list option; a second pattern after one
    `--include` would be a file name), or all of them after one (hub 0.x: argparse nargs='*',
    where a repeated `--include` keeps only the last)."""
    source: str
    writes_home: bool = False
    """The CLI writes into $HF_HOME (hub 1.x's update check, `.check_for_update_done`): HF_HOME
    must be writable, so a token file comes by HF_TOKEN_PATH instead (huggingface-hub-1.24.0)."""


HUB_CLI_LEGACY = HubCli("huggingface-cli", include_each=False, source="huggingface-hub-0.24.5")
"""huggingface-hub 0.22-0.x, in the training images."""
HUB_CLI_0 = HubCli("hf", include_each=False, source="huggingface-hub-cli")
"""huggingface-hub 0.34-0.x: `hf` beside the deprecated `huggingface-cli`."""
HUB_CLI_1 = HubCli("hf", include_each=True, source="huggingface-hub-cli", writes_home=True)
"""huggingface-hub 1.x: `hf` only (`huggingface-cli` is gone)."""


OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Either one set to 1 makes huggingface-hub (>= 0.22) and transformers read only the cache."""
CACHE_ENV = "HF_HUB_CACHE"
"""The Hub cache huggingface-hub and transformers read (default $HF_HOME/hub)."""
CACHE_MARKER = ("version.txt", "1")
"""transformers' cache version file: without it, every process that imports transformers tries
to migrate a non-empty cache and write the file (utils/hub.py of transformers 4.44.0)."""


def cache_folder(repo: str) -> str:
    """A model repository's folder in the Hub cache (models--<owner>--<name>)."""
    return "--".join(["models", *repo.split("/")])


BERT_LARGE_UNCASED = HubRepo("bert-large-uncased", ("config.json", "pytorch_model.bin"))
"""get_model: BertForPreTraining.from_pretrained('bert-large-uncased', use_safetensors=False)."""
TOKENIZER_FILES = (
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
)
"""What AutoTokenizer.from_pretrained reads when a repository has it."""
HUB_TOKENIZER_PATTERNS = (
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab*",
    "merges*",
    "*.model",
    "*.spm",
    "*.tiktoken",
    "*.jinja",
    "chat_template*",
    "chat_templates/*",
)
"""Tokenizer files of every kind and chat templates, as a staging pattern: what Megatron Bridge
0.6.0's tokenizer snapshot selects (src/megatron/bridge/training/tokenizers/tokenizer.py lines
47-61) less config.json and remote code (`*.py`, never run: trust_remote_code is off)."""
MEGATRON_TOKENIZER_REPOS = {
    "GPT2BPETokenizer": "gpt2",
    "BertWordPieceLowerCase": "bert-large-uncased",
    "BertWordPieceCase": "bert-large-cased",
}
"""NeMo's megatron tokenizer types -> the Hub repository AutoTokenizer loads them from
(tokenizer_utils megatron_tokenizer_model_map, megatron_utils MEGATRON_CONFIG_MAP tokenizer_name)."""


def tokenizer_repo(library: str, name: str | None) -> HubRepo | None:
    """The Hub repository a NeMo tokenizer reads (None: no Hub read). megatron: its type's
    repository; huggingface: the name unless it is a directory. AutoTokenizer needs config.json
    when the tokenizer config names no tokenizer class."""
    repo = MEGATRON_TOKENIZER_REPOS.get(name or "") if library == "megatron" else name
    if library not in ("megatron", "huggingface") or not repo or repo.startswith("/"):
        return None
    return HubRepo(repo, ("config.json",), TOKENIZER_FILES)


@dataclass(frozen=True)
class Port:
    """A port a program listens on: a number, or the variable that carries it."""

    number: int | None = None
    env: str | None = None


@dataclass(frozen=True)
class Program:
    """One program, what it needs at run time, and the upstream fact file that says so."""

    name: str
    """As the rendered commands call it."""
    source: str
    """tests/upstream/<source>.yaml."""
    endpoints: tuple[Endpoint, ...] = ()
    hub: tuple[HubRepo, ...] = ()
    tokenizer_overrides: bool = False
    """Reads the tokenizer its `model.tokenizer.*` overrides name (tokenizer_repo)."""
    named_repos: bool = False
    """Reads the Hub repositories its arguments name (Megatron Bridge: the model repository of
    run_recipe.py's --recipe and its `tokenizer.tokenizer_model`; run_conversion.py's --hf-model)."""
    accelerator: bool = False
    """Initialises its node's accelerator (the Neuron runtime's nrt_init, or CUDA): the node's
    driver must fit the runtime of the image it runs in (facts.images.Runtime, facts.drivers)."""
    remote_daemons: bool = False
    """Starts its daemons on the other hosts over ssh (Open MPI's orted)."""
    binds: tuple[Port, ...] = ()
    model_argument: bool = False
    """Reads the model its first argument names: a local folder, or a Hub repository (its
    config.json and weights through huggingface-hub, offline from the cache when told so)."""


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in (
        Program(
            "dp_bert_large_hf_pretrain_hdf5.py",
            "dp-bert-hf-pretrain-v2.27.0",
            endpoints=(IMDS,),
            hub=(BERT_LARGE_UNCASED,),
            accelerator=True,
        ),
        Program("megatron_gpt_pretraining.py", "nemo-r2.0.0rc1", tokenizer_overrides=True, accelerator=True),
        Program("neuron_parallel_compile", "neuronx-nemo-megatron-2.21", accelerator=True),
        Program("preprocess_data_for_megatron.py", "neuronx-nemo-megatron-2.21"),
        # Across nodes it also needs NEURON_RT_ROOT_COMM_ID (the launch harness's stand-in holds that).
        Program("nccom-test", "nccom-test-2.29.1", accelerator=True),
        Program("all_reduce_perf", "awsome-distributed-training-efa", accelerator=True),
        Program("fio", "fio-3.42"),  # reads and writes /shared only: no endpoint, device or port
        Program("mpirun", "open-mpi-orterun", remote_daemons=True),
        # The rendezvous on the first node (train_setup.sh sets MASTER_PORT 41000; ours is outside the ephemeral range).
        Program("torchrun", "neuronx-nemo-megatron-2.21", binds=(Port(env="MASTER_PORT"),)),
        Program("huggingface-cli", "huggingface-hub-0.24.5", endpoints=(HUB,)),
        Program("hf", "huggingface-hub-1.24.0", endpoints=(HUB,)),
        Program("run_recipe.py", "megatron-bridge-0.6.0", named_repos=True, accelerator=True),
        Program("run_conversion.py", "megatron-bridge-0.6.0", named_repos=True),
        Program("aws", "dp-bert-hf-pretrain-v2.27.0", endpoints=(S3,)),
        # The operator's root worker command: sshd -De on its default port (22; 2222 is the non-root variant's).
        Program("/usr/sbin/sshd", "mpi-operator-v0.8.0-pods", binds=(Port(22),)),
        Program("ddp_cpu_train.py", "horovod-cpu-0.28.1"),
        # NxD's Llama example: the model config from the image's directory, the corpus from disk
        # (datasets.load_from_disk); logger.py asks IMDS for the instance type, HOSTNAME without it.
        Program("tp_zero1_llama_hf_pretrain.py", "neuronx-distributed-v2.28.0", endpoints=(IMDS,), accelerator=True),
        # load_dataset("wikicorpus", "raw_en", trust_remote_code=True): the dataset's loading script
        # from the Hub (and whatever hosts that script downloads from: not recorded, it is not at hand).
        Program("get_dataset.py", "neuronx-distributed-v2.28.0", endpoints=(HUB,)),
        # Loads the xser shards to the XLA device (torch_xla's xser: the Neuron runtime) to merge them.
        Program("convert_checkpoints.py", "neuronx-distributed-v2.28.0", accelerator=True),
        Program("download_hf_assets.py", "torchtitan-config-cli", endpoints=(HUB,)),
        # `-m torchtitan.train`: the tokenizer from --hf_assets_path, the dataset from the checkout or /shared.
        Program("torchtitan.train", "torchtitan-config-cli", accelerator=True),
        # `vllm serve <model>`: the OpenAI server on --port (FrontendArgs), the model from the Hub
        # unless a folder; it initialises the GPUs or Neuron devices of its tensor-parallel ranks.
        Program("vllm", "vllm-v0.24.0", accelerator=True, binds=(Port(8000),), model_argument=True),
        # The training recipes' converters to Hugging Face: CPU only, files on /shared in and out.
        Program("convert_llama_nemo_to_hf.py", "nemo-r2.0.0rc1"),
        Program("convert_nemo_checkpoint_to_hf_llama.py", "neuronx-nemo-megatron-2.21"),
    )
}
"""Every program the recipes' commands run beyond the base image's shell utilities."""
