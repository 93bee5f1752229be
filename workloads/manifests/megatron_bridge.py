"""Recipe `megatron-bridge`: Llama 3.1 or Qwen3 pre-training or SFT with Megatron Bridge 0.6.0 (NGC nemo:26.08
in images/nemo-megatron-bridge/), with every Hugging Face Hub file staged first and read offline.

Steps: image check -> shared directories -> the token's Secret -> one Job with egress stages the
model repository's files into the tenant's Hub cache `/shared/hf-hub` (`hf download --cache-dir`,
the library's own layout; workloads/manifests/hub.py) -> for SFT, one Job imports the Hugging Face weights into a
Megatron checkpoint (`run_conversion.py import`, CPU backend) -> the training MPIJob: the health
gate, `run_recipe.py` under torchrun on every node with the Hub offline, then the export of the
latest checkpoint to Hugging Face format on the first node (`run_conversion.py export`).

Why staging: the library recipes build their model from the Hub repository's config on every rank
(`AutoBridge.from_hf_pretrained`), the tokenizer reads its files, the import its weights; the
training pods have no egress. The pinned huggingface-hub (1.24.0) ships `hf`; its
`huggingface-cli` only prints that it no longer works and exits 1.
"""

from __future__ import annotations

import re
import shlex

from config.workloads import MegatronBridgeWorkload
from facts import megatron_bridge as bridge
from facts import needs
from workloads.manifests.companions import extras
from workloads.manifests.convert import copy_export
from workloads.manifests.healthcheck import training
from workloads.manifests.hub import cache_dir, offline_env
from workloads.manifests.megatron import torchrun
from workloads.manifests.objects import (
    HUGGING_FACE_TOKEN,
    SMALL_POD,
    Context,
    Source,
    Step,
    checkpoint_dir,
    data_dir,
    image_check,
    job,
    labels,
    run_dir,
    secret,
    shared_dirs,
    short_hash,
)

TOKEN_DIR = "/etc/huggingface"
"""The token Secret's read-only mount; HF_TOKEN_PATH names the file (huggingface-hub 1.24.0 constants)."""
HF_HOME = "/tmp/huggingface"
"""The Hub client's own files (the CLI's update check writes there): a writable scratch directory,
not the read-only token mount."""
TOKEN_PATH_ENV = "HF_TOKEN_PATH"
CONVERSION = f"python3 {bridge.BRIDGE_DIR}/{bridge.RUN_CONVERSION}"


def import_dir(ctx: Context, workload_name: str, run: MegatronBridgeWorkload) -> str:
    """The imported Megatron checkpoint of a repository at a revision (shared by every run that uses it)."""
    return f"{data_dir(ctx, workload_name)}/import-{short_hash(run.hf_model.hf_repo, run.revision)}"


def stage_script(run: MegatronBridgeWorkload, cache: str) -> str:
    """Download once (a marker per repository, revision and file set), then fail naming any
    required file the snapshot lacks. A commit revision has no refs file: it is its own snapshot.
    transformers' cache version file is written too (hub.py says why)."""
    (staged,) = run.hub_repos
    repo, rev, required = staged.repo, staged.revision, staged.files
    folder = f"{cache}/{needs.cache_folder(repo)}"
    marker = f"{cache}/.staged/{needs.cache_folder(repo)}-{short_hash(staged)}"
    includes = " ".join(f"--include {shlex.quote(p)}" for p in staged.patterns)
    version_file, version = needs.CACHE_MARKER
    snapshot = f'"{folder}/snapshots/$commit"'
    checks = "".join(
        (f"ls {snapshot}/{p} >/dev/null 2>&1" if "*" in p else f"test -f {snapshot}/{p}")
        + f' || {{ echo "FAIL: {repo}@{rev} has no {p}"; exit 1; }}\n'
        for p in required
    )
    return (
        f"if [ -f {marker} ]; then echo '{repo}@{rev} already staged'; exit 0; fi\n"
        f"hf download {repo} --revision {shlex.quote(rev)} --cache-dir {cache} {includes}\n"
        f'ref="{folder}/refs/{rev}"\n'
        f'if [ -f "$ref" ]; then commit=$(cat "$ref"); else commit={shlex.quote(rev)}; fi\n'
        f"{checks}"
        f"mkdir -p {cache}/.staged && touch {marker}\n"
        f"test -f {cache}/{version_file} || echo {version} > {cache}/{version_file}\n"
        f'echo "staged {repo}@$commit"'
    )


def snapshot_folder(run: MegatronBridgeWorkload, cache: str) -> str:
    """Shell words for the staged snapshot of the recipe's repository at its revision (a commit is
    its own snapshot; a branch is named by its refs file). The conversion worker is given this
    folder, not the Hub id: with `--hf-revision` it resolves the revision first, an import by
    HfApi().model_info (refused offline) and an export by a snapshot of every file of the
    repository (incomplete offline), run_conversion.py lines 121-142, utils.py lines 30-83."""
    folder = f"{cache}/{needs.cache_folder(run.hf_model.hf_repo)}"
    if re.fullmatch(r"[0-9a-f]{40}", run.revision):
        return f"{folder}/snapshots/{run.revision}"
    return f'"{folder}/snapshots/$(cat {folder}/refs/{shlex.quote(run.revision)})"'


def import_script(run: MegatronBridgeWorkload, out: str, cache: str) -> str:
    """The CPU backend's import (one process; TP=PP=1), offline from the staged snapshot; `--overwrite`
    clears what an interrupted attempt left. Marked done once Bridge's tracker file is written."""
    return (
        f"test -f {out}/.done && {{ echo 'already imported'; exit 0; }}\n"
        f"{CONVERSION} import --device cpu --hf-model {snapshot_folder(run, cache)}"
        f" --megatron-path {out} --torch-dtype bfloat16 --overwrite\n"
        f"test -f {out}/{bridge.TRACKER_FILE}"
        f' || {{ echo "FAIL: the import wrote no {bridge.TRACKER_FILE} in {out}"; exit 1; }}\n'
        f"touch {out}/.done"
    )


def recipe_overrides(workload_name: str, run: MegatronBridgeWorkload, ctx: Context) -> list[str]:
    """The ConfigContainer overrides after the library recipe: parallelism, length and batch,
    precision, the tokenizer of the Hub repository (so the model's vocabulary is the one an export
    writes), checkpoints, logs and data; the stack's own overrides last."""
    r, repo, ckpt = run.resolved(), run.hf_model.hf_repo, checkpoint_dir(ctx, workload_name, run.run_id)
    vp = "null" if r["vp"] == 1 else r["vp"]
    out = [
        f"model.tensor_model_parallel_size={r['tp']}",
        f"model.pipeline_model_parallel_size={r['pp']}",
        f"model.context_parallel_size={r['cp']}",
        f"model.virtual_pipeline_model_parallel_size={vp}",
        f"model.sequence_parallel={str(r['sp']).lower()}",
        f"train.train_iters={run.training.train_iters}",
        *schedule_overrides(run),
        f"train.global_batch_size={r['gbs']}",
        f"train.micro_batch_size={r['mbs']}",
        f"dataset.seq_length={r['seq']}",
        f"mixed_precision={bridge.MIXED_PRECISION[run.precision]}",
        "tokenizer.tokenizer_type=HuggingFaceTokenizer",
        f"tokenizer.tokenizer_model={repo}",
        f"checkpoint.save={ckpt}",
        f"checkpoint.load={ckpt}",
        f"checkpoint.save_interval={run.checkpoint_interval}",
        f"checkpoint.most_recent_k={run.checkpoints.keep}",
        f"logger.tensorboard_dir={run_dir(ctx, workload_name, run.run_id)}/tb_logs",
    ]
    if run.mode == "pretrain":
        out.append("tokenizer.vocab_size=null")  # the recipe's NullTokenizer size; the tokenizer's own instead
    if run.imports:
        out.append(f"checkpoint.pretrained_checkpoint={import_dir(ctx, workload_name, run)}")
    if run.data.source == "indexed":
        out += [
            f"dataset.data_path=[{','.join(run.data.paths)}]",
            f"dataset.path_to_cache={data_dir(ctx, workload_name)}/index-cache",
        ]
    elif run.data.source == "jsonl":
        out += [f"dataset.dataset_root={run.data.dataset_root}", "dataset.do_test=false"]
    return [*out, *(f"{k}={v}" for k, v in sorted(run.overrides.items()))]


def schedule_overrides(run: MegatronBridgeWorkload) -> list[str]:
    """The learning-rate schedule sized to the run and its validation: without them the library
    recipe's own (sized for its own length: Qwen3 SFT's decay ends at step 100) would run."""
    s, lib, length = run.lr_schedule, run.library_recipe.schedule, run.run_length
    assert length.validation is not None  # a Bridge run always validates (its recipes' ValidationConfig)
    return [
        f"scheduler.lr_warmup_iters={s.warmup_steps}",
        f"scheduler.lr_decay_iters={s.decay_end}",
        f"optimizer.min_lr={lib.lr * s.min_lr_ratio:g}",
        f"validation.eval_interval={length.validation.interval}",
        f"validation.eval_iters={length.validation.iters}",
    ]


DATASET = {"mock": "mock", "indexed": "megatron-indexed", "jsonl": "local-jsonl"}
"""The recipe's data source -> run_recipe.py's --dataset."""


def export_phase(run: MegatronBridgeWorkload, cache: str) -> str:
    """On the first node: the latest checkpoint (Bridge's tracker) to Hugging Face format in
    `$RUN_DIR/hf`, once per checkpoint (a marker names it, written only once the export succeeded),
    CPU backend, offline, reading the staged snapshot folder (snapshot_folder says why)."""
    # -e: a failed export fails the launcher and leaves no marker (else the next line marked it done).
    script = (
        "set -euo pipefail\n"
        '[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0\n'
        f'step=$(cat "$CHECKPOINT_DIR/{bridge.TRACKER_FILE}")\n'
        f'iter=$(printf "{bridge.ITERATION_DIR.replace("{:07d}", "%07d")}" "$step")\n'
        'if [ -f "$RUN_DIR/.exported-$iter" ]; then echo "$iter already exported"; exit 0; fi\n'
        f"{CONVERSION} export --device cpu --hf-model {snapshot_folder(run, cache)}"
        ' --megatron-path "$CHECKPOINT_DIR/$iter"'
        ' --hf-path "$RUN_DIR/hf" --overwrite\n'
        'touch "$RUN_DIR/.exported-$iter" && echo "exported $iter to $RUN_DIR/hf"'
    )
    return f'echo "== export to Hugging Face format"\n$MPIRUN bash -c {shlex.quote(script)}\n'


def launch(workload_name: str, run: MegatronBridgeWorkload, ctx: Context) -> str:
    """Training (resumes from the latest checkpoint in checkpoint.load), then the export."""
    recipe = run.library_recipe.name
    script = f"{bridge.RUN_RECIPE} --recipe {recipe} --mode {run.mode} --dataset {DATASET[run.data.source]}"
    phases = f'echo "== training"\n{torchrun(bridge.BRIDGE_DIR, script, recipe_overrides(workload_name, run, ctx))}\n'
    return phases + (export_phase(run, cache_dir(ctx)) if run.export else "")


def convert(source: Source, out: str, ctx: Context) -> str:
    """A serving run's model: the run's own export (`hf`: safetensors, config.json and the tokenizer,
    Bridge's save_hf_pretrained), complete once an `.exported-<iteration>` marker is written."""
    rdir = run_dir(ctx, source.workload, source.run_id)
    newest = f"exported=; ls {rdir}/.exported-* >/dev/null 2>&1 && exported={rdir}/hf\n"
    return copy_export(newest, out)


MODEL = MegatronBridgeWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: MegatronBridgeWorkload, ctx: Context) -> list[Step]:
    """Image check -> directories -> token -> Hub staging -> (SFT) import -> training MPIJob, plus TensorBoard."""
    image = image_check(workload_name, ctx, run)
    cache = cache_dir(ctx)
    dirs = shared_dirs(workload_name, ctx, after=(image.name,), also=(cache,))
    token = secret(
        f"{workload_name}-hf-token", ctx, labels(workload_name, "secret"), "secret", {"HF_TOKEN": HUGGING_FACE_TOKEN}
    )
    items = [{"key": "HF_TOKEN", "path": "token"}]
    token_mount = (
        {"name": "hf-token", "secret": {"secretName": token.name, "items": items, "defaultMode": 0o444}},
        {"name": "hf-token", "mountPath": TOKEN_DIR, "readOnly": True},
    )
    env = [{"name": "HF_HOME", "value": HF_HOME}, {"name": TOKEN_PATH_ENV, "value": f"{TOKEN_DIR}/token"}]
    hub_name = f"{workload_name}-hub-{short_hash(run.hub_repos)}"
    timeout = 4 * 3600 if run.imports else 1800
    hub = Step(
        hub_name,
        "hub",
        job(hub_name, ctx, labels(workload_name, "data", internet=True), stage_script(run, cache), env=env,
            timeout=timeout, resources=SMALL_POD, mounts=(token_mount,)),
        after=(dirs.name, token.name),
    )  # fmt: skip
    chain = [image, dirs, token, hub]
    if run.imports:
        out = import_dir(ctx, workload_name, run)
        name = f"{workload_name}-import-{short_hash(run.hf_model.hf_repo, run.revision)}"
        offline = [{"name": k, "value": v} for k, v in sorted(offline_env(ctx).items())]
        env_import = [{"name": "HF_HOME", "value": HF_HOME}, *offline]
        obj = job(
            name, ctx, labels(workload_name, "data"), import_script(run, out, cache), env=env_import, timeout=4 * 3600
        )
        chain.append(Step(name, "import", obj, after=(hub.name,)))
    return [
        *chain,
        *training(
            workload_name, run, ctx, launch(workload_name, run, ctx), env=offline_env(ctx),
            after=(chain[-1].name,),
        ),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]  # fmt: skip
