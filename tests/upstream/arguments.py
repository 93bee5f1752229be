"""One check per upstream facts file that a recipe holds its rendered commands against.

A recipe names its files (`ARGUMENTS = HeldAgainst(("dp-bert-hf-pretrain-v2.27.0",), ...)`,
config/workloads/<recipe>.py); tests/plan/test_recipe_arguments.py runs the check of each
named file over the Kubernetes objects the recipe renders. A check raises AssertionError on
an argument the upstream does not accept and returns how many commands it checked: a recipe
that names a file whose commands it never runs fails too (0 checked).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from hydra.errors import ConfigCompositionException, HydraException
from omegaconf.errors import OmegaConfBaseException

from tests import upstream
from tests.upstream.hydra import Launch, compose_upstream, launches, schema_problems

Objects = Iterable[dict[str, Any]]
Check = Callable[[Objects], int]


def containers(objs: Objects) -> list[tuple[str, dict[str, Any]]]:
    """(role, container) of every Job and MPIJob: `job`, `launcher` or `worker`."""
    found = []
    for obj in objs:
        if obj.get("kind") == "Job":
            found.extend(("job", c) for c in obj["spec"]["template"]["spec"]["containers"])
        elif obj.get("kind") == "MPIJob":
            for role, spec in obj["spec"]["mpiReplicaSpecs"].items():
                found.extend((role.lower(), c) for c in spec["template"]["spec"]["containers"])
    return found


def script(container: dict[str, Any]) -> str:
    """The shell script a container runs (the last word of its command)."""
    return str(container["command"][-1])


def launcher_scripts(objs: Objects) -> list[str]:
    return [script(c) for role, c in containers(objs) if role == "launcher"]


def compose(facts_name: str, launch: Launch) -> None:
    """Compose one launch's overrides against the upstream config it names, as the upstream
    script would; no `???` may be left and exp_manager keys must be fields of its schema."""
    try:
        cfg = compose_upstream(facts_name, launch.config_name, launch.overrides)
    except ConfigCompositionException as e:
        cause = e.__cause__ or e
        raise AssertionError(f"{launch.config_name} ({facts_name}): {e}: {cause}") from None
    problems = schema_problems(facts_name, cfg)
    assert problems == [], f"{launch.config_name} ({facts_name}): {problems}"


def hydra(facts_name: str) -> Check:
    """Every megatron_gpt_pretraining.py launch composes against `facts_name`'s configs; a
    neuron_parallel_compile launch is upstream's compile-only run (where the facts record one)."""

    def check(objs: Objects) -> int:
        compile_only = upstream.facts(facts_name).get("compile_only_run")
        found = [launch for text in launcher_scripts(objs) for launch in launches(text)]
        for launch in found:
            compose(facts_name, launch)
            if compile_only and "neuron_parallel_compile" in launch.prefix:
                args = dict(o.split("=", 1) for o in launch.overrides)
                assert args["exp_manager.create_tensorboard_logger"] == compile_only["CREATE_TB_LOGGER"]
                assert args["exp_manager.create_checkpoint_callback"] == compile_only["CHECKPOINT_CALLBACK"]
        return len(found)

    return check


BERT = "dp-bert-hf-pretrain-v2.27.0"


def bert_runs(text: str) -> list[list[str]]:
    """The words after the BERT script of each of its runs in a launcher script."""
    name = upstream.facts(BERT)["script"]
    found = []
    for line in text.splitlines():
        if name not in line:
            continue
        (inner,) = [w for w in shlex.split(line) if name in w]
        found.append(shlex.split(inner.split(name, 1)[1].replace("$r", "")))
    return found


def bert_options(objs: Objects) -> int:
    """Every option passed to dp_bert_large_hf_pretrain_hdf5.py is one its argparse defines."""
    accepted = set(upstream.facts(BERT)["options"])
    runs = [words for text in launcher_scripts(objs) for words in bert_runs(text)]
    for words in runs:
        options = {w.split("=", 1)[0] for w in words if w.startswith("--")}
        assert options <= accepted, f"not options of {BERT}: {sorted(options - accepted)}"
    return len(runs)


def huggingface_downloads(objs: Objects) -> int:
    """Every `huggingface-cli download` passes only the command's options, and copies files
    (`--local-dir-use-symlinks False`: below 0.23 it links large files into the pod's cache)."""
    facts = upstream.facts("huggingface-hub-0.22.2")
    downloads = 0
    for _, c in containers(objs):
        for line in script(c).splitlines():
            words = shlex.split(line) if "huggingface-cli" in line else []
            if words[:2] != ["huggingface-cli", "download"]:
                continue
            downloads += 1
            options = [w for w in words if w.startswith("--")]
            assert set(options) <= set(facts["download_options"]), options
            value = words[words.index("--local-dir-use-symlinks") + 1]
            assert value == "False" and value in facts["local_dir_use_symlinks_choices"]
    return downloads


def horovod_cpu_programs(objs: Objects) -> int:
    """The programs the launcher and worker call are where the public image has them."""
    programs = upstream.facts("horovod-cpu-0.28.1")["programs"]
    checked = 0
    for role, c in containers(objs):
        text = "\n".join(c["command"])
        if role == "worker":
            assert c["command"][0] == programs["bash"] and programs["sshd"] in text
            checked += 1
        elif role == "launcher":
            for name in ("ssh", "mpirun", "torchrun", "getconf"):
                if re.search(rf"(^|[\s'(]){name}\s", text):
                    assert name in programs, name
                    checked += 1
    return checked


def _runs_of(text: str, program: str) -> list[list[str]]:
    """The words after `program` (by name or path) on each line of a script, or of a script nested
    in it (`bash -c '...'`), that runs it."""
    found = []
    for line in text.splitlines():
        if program not in line:
            continue
        words = shlex.split(line)
        at = [i for i, w in enumerate(words) if w == program or w.endswith("/" + program)]
        if at:
            found.append(words[at[0] + 1 :])
        for nested in (w for w in words if program in w and any(c.isspace() for c in w)):
            found += _runs_of(nested, program)
    return found


def _options(words: list[str]) -> dict[str, str | None]:
    """`--opt=value` and bare `--flag` words -> option -> value (None: a flag)."""
    return {w.split("=", 1)[0]: (w.split("=", 1)[1] if "=" in w else None) for w in words if w.startswith("--")}


def _all_scripts(objs: Objects) -> list[str]:
    return [script(c) for _, c in containers(objs)]


NXD = "neuronx-distributed-v2.28.0"


def nxd_commands(objs: Objects) -> int:
    """Every run of the NxD example's scripts passes only options their argparse defines, with a
    value exactly where the option takes one; the converter gets one --convert_* and no bool-typed
    option set to anything but True (argparse's type=bool makes any non-empty string True)."""
    facts = upstream.facts(NXD)
    checked = 0
    for text in _all_scripts(objs):
        for words in _runs_of(text, facts["script"]):
            opts = _options(words)
            assert set(opts) <= set(facts["options"]), sorted(set(opts) - set(facts["options"]))
            flags = {o for o, v in opts.items() if v is None}
            assert flags == flags & set(facts["flags_without_value"]), flags - set(facts["flags_without_value"])
            assert opts["--model_path"].rsplit("/", 1)[-1] in facts["config_dirs"].values(), opts["--model_path"]
            checked += 1
        for words in _runs_of(text, "get_dataset.py"):
            assert set(_options(words)) <= set(facts["data"]["get_dataset"]["options"]), words
            checked += 1
        conv = facts["converter"]
        for words in _runs_of(text, conv["script"]):
            opts = _options(words)
            assert set(opts) <= set(conv["options"]) and set(conv["required"]) <= set(opts), sorted(opts)
            assert len(set(opts) & set(conv["exactly_one_of"])) == 1, sorted(opts)
            assert all(opts[o] == "True" for o in set(opts) & set(conv["bool_typed"])), opts
            checked += 1
    return checked


def huggingface_hub_0_27_1(objs: Objects) -> int:
    """Every `huggingface-cli download` passes only options of huggingface-hub 0.27.1's command."""
    allowed = set(upstream.facts("huggingface-hub-0.27.1")["download_options"])
    runs = [w for text in _all_scripts(objs) for w in _runs_of(text, "huggingface-cli") if w[:1] == ["download"]]
    for words in runs:
        assert set(_options(words)) <= allowed, sorted(set(_options(words)) - allowed)
    return len(runs)


TORCHTITAN = "torchtitan-config-cli"


def torchtitan_commands(objs: Objects) -> int:
    """Every `-m torchtitan.train` names a config function (--module, --config) and passes only
    `--section.field` flags that are command-line fields at both ends of the upstream range the
    fork can be based on, bool ones without a value; download_hf_assets.py gets only its options
    and asset kinds."""
    facts = upstream.facts(TORCHTITAN)
    ends = [facts["lower"]["sections"], facts["upper"]["sections"]]
    checked = 0
    for text in _all_scripts(objs):
        for words in _runs_of(text, "torchtitan.train"):
            opts = _options(words)
            assert set(facts["entry_flags"]) <= set(opts), sorted(opts)
            for flag, value in opts.items():
                if flag in facts["entry_flags"]:
                    continue
                section, _, name = flag[2:].rpartition(".")
                for sections in ends:
                    assert name in sections.get(section, []), f"{flag}: not a command-line field at both ends"
                assert (value is None) == (flag[2:] in facts["bool_flags"]), flag
            checked += 1
        hf = facts["download_hf_assets"]
        for words in _runs_of(text, hf["script"]):
            assert set(_options(words)) <= set(hf["options"]), words
            kinds = words[words.index("--assets") + 1 :]
            kinds = kinds[: next((i for i, w in enumerate(kinds) if w.startswith("--")), len(kinds))]
            assert set(kinds) <= set(hf["assets"]), kinds
            checked += 1
    return checked


def _invocations(objs: Objects, program: str) -> list[list[str]]:
    """The words after `program` on each launcher-script line that runs it, up to the end of its
    command (a pipe, a redirection or the closing quote of an ssh command)."""
    found = []
    for text in launcher_scripts(objs):
        for line in text.splitlines():
            at = line.find(program + " ")
            if at < 0:
                continue
            rest = re.split(r'[|>"]', line[at + len(program) :], maxsplit=1)[0]
            found.append(rest.split())
    return found


def _option_words(words: list[str]) -> set[str]:
    return {w for w in words if w.startswith("-") and not re.match(r"^-?[0-9]", w)}


def nccl_tests_options(objs: Objects) -> int:
    """Every all_reduce_perf run passes only options nccl-tests v2.18.5 defines."""
    facts = upstream.facts("gpu-fabric-stack-2026-11")["nccl_tests"]
    runs = _invocations(objs, facts["binary"])
    for words in runs:
        bad = _option_words(words) - set(facts["options"])
        assert not bad, f"not options of all_reduce_perf {facts['newest_2_18_tag']}: {sorted(bad)}"
    return len(runs)


def ofi_log_lines(objs: Objects) -> int:
    """The GPU gate reads NCCL's "Using network <name>" with aws-ofi-nccl's network name, and the
    plugin's provider line in the format of 1.21.1 (and before 1.15)."""
    facts = upstream.facts("aws-ofi-nccl-v1.21.1")
    checked = 0
    for text in launcher_scripts(objs):
        if "all_reduce_perf" not in text:
            continue
        assert f"Using network {facts['plugin_network_name']}" in text
        assert "selected provider is efa" in text and "nics" in text
        checked += 1
    return checked


def nccom_test_options(objs: Objects) -> int:
    """Every nccom-test run passes only options nccom-test 2.32.0 defines; a multi-node one sets
    NEURON_RT_ROOT_COMM_ID and lists its hosts (its MPI mode)."""
    facts = upstream.facts("nccom-test-2.32.0")
    accepted = {part for opt in facts["options"] for part in opt.split("/")}
    runs = _invocations(objs, facts["binary"])
    for words in runs:
        bad = _option_words(words) - accepted
        assert not bad, f"not options of nccom-test 2.32.0: {sorted(bad)}"
    multi = [
        text for text in launcher_scripts(objs) for ln in text.splitlines() if facts["binary"] in ln and " -N " in ln
    ]
    for line in multi:
        assert "NEURON_RT_ROOT_COMM_ID=" in line and "--hosts" in line
    return len(runs)


CONVERTER_FACTS = ("nemo-r2.0.0rc1", "neuronx-nemo-megatron-2.21")
"""The training recipes' upstream facts that record their converter to Hugging Face (`hf_converter`)."""


def _templates(obj: dict[str, Any], worker: bool = False) -> list[dict[str, Any]]:
    """A Deployment's pod template, or a LeaderWorkerSet's leader (or worker) template."""
    if obj.get("kind") == "Deployment" and not worker:
        return [obj["spec"]["template"]]
    if obj.get("kind") == "LeaderWorkerSet":
        return [obj["spec"]["leaderWorkerTemplate"]["workerTemplate" if worker else "leaderTemplate"]]
    return []


def _servers(objs: Objects, worker: bool = False) -> list[dict[str, Any]]:
    return [
        c
        for obj in objs
        for t in _templates(obj, worker)
        for c in t["spec"]["containers"]
        if c["command"][:2] == ["vllm", "serve"]
    ]


def _group_workers(objs: Objects) -> int:
    """Every headless worker of a group passes the leader's options, its own rank (the variable
    LWS injects) and --headless, and names only variables LWS injects; the group's ranks divide
    over its nodes (vLLM 0.24.0 create_engine_config)."""
    from facts import serving

    lws = upstream.facts("lws-v0.9.0")
    checked = 0
    objs = list(objs)
    for obj in objs:
        if obj.get("kind") != "LeaderWorkerSet":
            continue
        size = obj["spec"]["leaderWorkerTemplate"]["size"]
        (leader,) = _servers([obj])
        (worker,) = _servers([obj], worker=True)
        pinned = serving.image_for_name(worker["image"])
        assert pinned is not None
        multi = upstream.facts(pinned.facts)["multi_node"]
        words = worker["command"][2:]
        flags = [w for w in words if w in multi["flags"]]
        assert flags == ["--headless"], words
        values = dict(zip(words[1::2], words[2::2], strict=False))
        lead = dict(zip(leader["command"][3::2], leader["command"][4::2], strict=False))
        assert {k: v for k, v in values.items() if k != "--node-rank"} == {
            k: v for k, v in lead.items() if k != "--node-rank"
        }
        assert lead["--node-rank"] == "0" and values["--node-rank"] == "$(LWS_WORKER_INDEX)"
        refs = set(re.findall(r"\$\((\w+)\)", " ".join(leader["command"] + worker["command"])))
        assert refs <= set(lws["injected_env"]), refs
        assert values["--distributed-executor-backend"] == multi["backend"] and int(values["--nnodes"]) == size
        world = int(values["--tensor-parallel-size"]) * int(values.get("--pipeline-parallel-size", "1"))
        assert world % size == 0, (world, size)
        checked += 1
    return checked


def vllm_serve(objs: Objects) -> int:
    """Every `vllm serve` passes one model and only options of the parser of the vLLM its image
    holds (tests/upstream/vllm-v<version>.yaml, the image's version from facts.serving), a dtype
    it accepts and the port its probes and Service use; every conversion Job calls its
    converter with the options upstream's argparse defines, the required ones included."""
    from facts import serving

    objs = list(objs)
    checked = _group_workers(objs)
    for c in _servers(objs):
        pinned = serving.image_for_name(c["image"])
        assert pinned is not None, f"{c['image']}: not a pinned vLLM image (facts/serving.py)"
        facts = upstream.facts(pinned.facts)
        words = c["command"][2:]
        options = [w for w in words if w.startswith("--")]
        assert set(options) <= set(facts["options"]), sorted(set(options) - set(facts["options"]))
        values = dict(zip(words[1::2], words[2::2], strict=False))
        assert not words[0].startswith("--") and len(words) == 1 + 2 * len(options), words
        assert values["--dtype"] in facts["dtype_choices"]
        assert int(values["--port"]) == facts["default_port"] == c["ports"][0]["containerPort"]
        assert c["startupProbe"]["httpGet"]["path"] == facts["health_path"]
        checked += 1
    for _, c in containers(objs):
        for name in CONVERTER_FACTS:
            conv = upstream.facts(name)["hf_converter"]
            for line in script(c).splitlines():
                if conv["script"] not in line:
                    continue
                options = {w for w in shlex.split(line) if w.startswith("--")}
                assert options <= set(conv["options"]), (name, sorted(options - set(conv["options"])))
                assert set(conv["required"]) <= options, (name, conv["required"])
                checked += 1
    return checked


CHECKS: dict[str, Check] = {
    "neuronx-nemo-megatron-2.21": hydra("neuronx-nemo-megatron-2.21"),
    "nemo-r2.0.0rc1": hydra("nemo-r2.0.0rc1"),
    BERT: bert_options,
    "huggingface-hub-0.22.2": huggingface_downloads,
    "horovod-cpu-0.28.1": horovod_cpu_programs,
    NXD: nxd_commands,
    "huggingface-hub-0.27.1": huggingface_hub_0_27_1,
    TORCHTITAN: torchtitan_commands,
    "gpu-fabric-stack-2026-11": nccl_tests_options,
    "aws-ofi-nccl-v1.21.1": ofi_log_lines,
    "nccom-test-2.32.0": nccom_test_options,
    "vllm-v0.24.0": vllm_serve,
}
"""Upstream facts file -> the check of rendered objects against it."""


def invocations(text: str, program: str) -> list[list[str]]:
    """The words after `program` (a word ending with it) in every line of a script, however deep
    in `bash -c '...'`, up to the end of its command."""
    found: list[list[str]] = []
    for line in text.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        for i, word in enumerate(words):
            if word == program or word.endswith("/" + program):
                rest = []
                for w in words[i + 1 :]:
                    if w in ("&&", "||", "|", ";", "2>&1"):
                        break
                    rest.append(w)
                found.append(rest)
            elif program in word and (" " in word or "\n" in word):
                found.extend(invocations(word, program))
    return found


BRIDGE = "megatron-bridge-0.6.0"
MCORE = "megatron-lm-core_r0.19.0"


def bridge_config_tree(dataset: str) -> dict[str, Any]:
    """The ConfigContainer as Bridge hands it to Hydra: every recorded field of each section (Bridge's
    class and the Megatron Core classes it extends), the dataset section of the --dataset chosen."""
    bridge_keys, mcore_keys = upstream.facts(BRIDGE)["config_keys"], upstream.facts(MCORE)["config_keys"]
    section_of = {"dataset": upstream.facts(BRIDGE)["run_recipe"]["dataset_config"][dataset]}
    tree: dict[str, Any] = dict.fromkeys(bridge_keys["root"]["fields"], "upstream-value")
    for section in (
        "train",
        "validation",
        "checkpoint",
        "logger",
        "scheduler",
        "optimizer",
        "tokenizer",
        "model",
        "dataset",
    ):
        recorded = section_of.get(section, section)
        keys = set(bridge_keys.get(recorded, {}).get("fields", [])) | set(
            mcore_keys.get(recorded, {}).get("fields", [])
        )
        tree[section] = dict.fromkeys(sorted(keys), None)
    return tree


def bridge_overrides_apply(dataset: str, overrides: list[str]) -> None:
    """Apply overrides as run_recipe.py does: Hydra's parser on the config in struct mode."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(bridge_config_tree(dataset))
    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)


def bridge_training(objs: Objects) -> int:
    """Every run_recipe.py launch: options it defines, a library recipe it exports, a mode that recipe
    takes, a dataset of that mode, mixed-precision recipes it registers, and ConfigContainer
    overrides that apply to the recorded keys; every run_conversion.py call: its command's options."""
    facts = upstream.facts(BRIDGE)
    rr, conv = facts["run_recipe"], facts["conversion_worker"]
    runs = [w for text in launcher_scripts(objs) for w in invocations(text, rr["path"])]
    for words in runs:
        options = {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--")}
        assert set(options) <= set(rr["options"]), sorted(set(options) - set(rr["options"]))
        recipe, mode, dataset = options["--recipe"], options["--mode"], options["--dataset"]
        assert recipe in facts["recipes"], recipe
        assert next(m for infix, m in rr["mode_infixes"].items() if infix in f"_{recipe}_") == mode, (recipe, mode)
        assert rr["datasets"][dataset] == ("pretrain" if mode == "pretrain" else "finetune"), (dataset, mode)
        overrides = [w for w in words if "=" in w and not w.startswith("-")]
        # Hydra adds a `+key`, but Bridge's _apply_overrides then skips a key its dataclass lacks.
        assert not [o for o in overrides if o.startswith(("+", "~"))], overrides
        precision = [o.split("=", 1)[1] for o in overrides if o.startswith("mixed_precision=")]
        assert set(precision) <= set(facts["mixed_precision"]), precision
        try:
            bridge_overrides_apply(dataset, overrides)
        except (HydraException, OmegaConfBaseException) as e:  # what run_recipe.py would stop on
            raise AssertionError(f"{recipe}: {e}") from None
    calls = [w for _, c in containers(objs) for w in invocations(script(c), conv["path"])]
    for words in calls:
        command, options = words[0], {w for w in words[1:] if w.startswith("-")}
        assert options <= set(conv["commands"][command]), sorted(options - set(conv["commands"][command]))
        assert set(conv["required"][command]) <= options, (command, options)
        assert words[words.index("--device") + 1] in conv["device_choices"]
    return len(runs) + len(calls)


def hf_downloads(objs: Objects) -> int:
    """Every `hf download` passes only the command's options, one value per repeated option; no
    step calls `huggingface-cli`, which huggingface-hub 1.x turned into a stub that exits 1."""
    facts = upstream.facts("huggingface-hub-1.24.0")
    download = facts["download"]
    checked = 0
    for _, c in containers(objs):
        text = script(c)
        assert "huggingface-cli" not in text, "huggingface-cli exits 1 in huggingface-hub 1.x: use hf"
        for words in invocations(text, "hf"):
            if words[:1] != ["download"]:
                continue
            checked += 1
            options = [w for w in words if w.startswith("--")]
            assert set(options) <= set(download["options"]), options
            for i, w in enumerate(words):
                if w in download["repeated"]:
                    assert not words[i + 2 :] or words[i + 2].startswith("--"), f"{w} takes one value per flag"
            for pair in download["exclusive"]:
                assert not set(pair) <= set(options), pair
    return checked


CHECKS[BRIDGE] = bridge_training
CHECKS["huggingface-hub-1.24.0"] = hf_downloads


def fio_options(objs: Objects) -> int:
    """Every fio run passes only options fio 3.42 defines (`--<name>=<value>` or a bare flag), an
    rw mode it has, and the launcher sums the JSON fields fio 3.42 writes."""
    facts = upstream.facts("fio-3.42")
    checked = 0
    for text in launcher_scripts(objs):
        # A run of fio passes options; a bare word ending in /fio (a path) runs nothing.
        runs = [words for words in invocations(text, facts["binary"]) if words]
        for words in runs:
            given = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
            assert set(given) <= set(facts["options"]), sorted(set(given) - set(facts["options"]))
            assert given.get("rw") in facts["rw_values"], given.get("rw")
            checked += 1
        if runs:
            read, bw = facts["json"]["read_bytes_per_second"]
            assert f'["{facts["json"]["jobs"]}"]' in text and f'["{read}"]["{bw}"]' in text
    return checked


CHECKS["fio-3.42"] = fio_options
