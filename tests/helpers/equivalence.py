"""The equivalence of strategies, as generated cases: N ranks of a strategy train to the weights
of one process given the whole batch, and a run resumed mid-epoch to the weights of the run that
was never stopped.

A ``Case`` draws one value from every axis (strategy, ranks, accumulation, optimizer, clipping,
resume, batch-size mode, model). ``run_case`` trains it on real ranks through trainkit's own
launcher (``tests/helpers/equivalence_program.py``, one interpreter per run) and the reference in
one process, and ``compare`` says whether the weights are equal, differ as documented, or are
broken. ``tests/integration/strategies/test_equivalence_matrix.py`` runs a fixed sample of the cases;
``scripts/check_equivalence.py --all`` runs the whole matrix and prints the table in
docs/strategies.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.command_env import cli_env
from tests.helpers.sessions import run_in_session
from trainkit import Callback, DataModule, Trainer, TrainModule
from trainkit.callbacks import BasePredictionWriter, ModelCheckpoint

PROGRAM = Path(__file__).with_name("equivalence_program.py")
FEATURES = 6
MICRO_BATCH = 4  # per loading rank
STEPS_PER_EPOCH = 2
EPOCHS = 2
RESUME_STEP = 1  # the mid-epoch checkpoint a resumed run starts from

STRATEGIES = (
    "ddp",
    "ddp_spawn",
    "ddp_fork",
    "ddp_sharded",
    "fsdp",
    "deepspeed_stage_1",
    "deepspeed_stage_2",
    "deepspeed_stage_3",
    "dp",
    "ddp2",
)
# one process drives all the node's devices: its loader's batch is the node's
PER_NODE_LOADING = {"dp", "ddp2"}
# one rank per device: a world of N ranks; dp/ddp2 on one CPU node run one process
MULTI_PROCESS = {s for s in STRATEGIES if s not in PER_NODE_LOADING}
# Lightning's names for the same strategy with DDP told that some parameters get no gradient
FIND_UNUSED = {
    "ddp": "ddp_find_unused_parameters_true",
    "ddp_spawn": "ddp_spawn_find_unused_parameters_true",
    "ddp_fork": "ddp_fork_find_unused_parameters_true",
}
AXES: dict[str, tuple[object, ...]] = {
    "strategy": STRATEGIES,
    "ranks": (1, 2, 4),
    "accumulate": (1, 2, 3),
    "optimizer": ("sgd", "momentum", "adam", "adamw_scheduler"),
    "clip": ("none", "norm", "value"),
    "resume": (False, True),
    "batch_size_mode": ("per_device", "effective"),
    "model": ("linear", "mlp_batchnorm", "buffer_unused"),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One cell of the matrix."""

    strategy: str = "ddp"
    ranks: int = 2
    accumulate: int = 1
    optimizer: str = "sgd"
    clip: str = "none"
    resume: bool = False
    batch_size_mode: str = "per_device"
    model: str = "linear"
    batch_of_ranks: int = 0  # the reference's: the effective batch is that of so many ranks

    @property
    def name(self) -> str:
        parts = [self.strategy, f"{self.ranks}r", f"acc{self.accumulate}", self.optimizer]
        parts += [f"clip_{self.clip}", self.batch_size_mode, self.model]
        if self.batch_of_ranks:
            parts.append(f"batch_of_{self.batch_of_ranks}")
        return "-".join(parts + (["resume"] if self.resume else []))

    @property
    def effective_batch(self) -> int:
        """Samples per micro-batch over the whole world (the reference's loader batch)."""
        return MICRO_BATCH * (self.batch_of_ranks or self.ranks)

    @property
    def loader_batch(self) -> int:
        """What the case's config gives as the loader's batch size (``effective``: the samples
        of one optimizer step, accumulated batches included)."""
        if self.batch_size_mode == "effective":
            return self.effective_batch * self.accumulate
        if self.ranks == 1 or self.strategy in PER_NODE_LOADING:
            return self.effective_batch
        return MICRO_BATCH

    @property
    def samples(self) -> int:
        return self.effective_batch * self.accumulate * STEPS_PER_EPOCH

    def reference(self) -> Case:
        """The same training in one process with the whole batch, never interrupted."""
        return dataclasses.replace(
            self,
            strategy="single",
            ranks=1,
            resume=False,
            batch_size_mode="per_device",
            batch_of_ranks=self.ranks,
        )

    def trainer_strategy(self) -> str:
        if self.model == "buffer_unused":
            return FIND_UNUSED.get(self.strategy, self.strategy)
        return self.strategy

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Case:
        return cls(**json.loads(text))


@dataclasses.dataclass(frozen=True)
class Difference:
    """Why a cell cannot equal one process (its line in docs/strategies.md), and the relation
    checked instead: ``refused`` (one line, exit 2, before training), ``equal_but`` (every
    weight equals one process's but those named in ``differ``) or ``finite`` (it trains to
    finite weights; nothing to compare)."""

    why: str
    relation: str
    differ: tuple[str, ...] = ()  # the weights (names, or prefixes ending in '.') left out


def documented_difference(case: Case) -> Difference | None:
    """The documented difference of ``case``, or None where it must equal one process."""
    deepspeed = case.strategy.startswith("deepspeed")
    replicas = case.strategy in PER_NODE_LOADING and case.ranks > 1
    if deepspeed and case.clip == "value":
        why = (
            "deepspeed's engine clips the norm only (Lightning clips the norm when asked for value)"
        )
        return Difference(why, "refused")
    if case.model == "mlp_batchnorm" and case.ranks > 1 and not replicas:
        return Difference(
            "sync_batchnorm on CPU: torch's SyncBatchNorm runs on CUDA only", "refused"
        )
    if case.model == "mlp_batchnorm" and replicas:
        return Difference("BatchNorm normalises each device's chunk of the batch", "finite")
    if case.model == "buffer_unused" and replicas:
        why = "a buffer the step updates is updated once per device chunk (on GPU: by device 0)"
        return Difference(why, "equal_but", ("calls",))
    flattens = case.strategy == "ddp_sharded" or deepspeed
    if flattens and case.model == "buffer_unused" and case.optimizer == "adamw_scheduler":
        why = (
            "fairscale and deepspeed give a parameter no rank used a zero gradient (one process: "
            "None), so AdamW's weight decay moves it"
        )
        return Difference(why, "equal_but", ("unused.",))
    return None


def all_cases() -> Iterator[Case]:
    """Every cell of the matrix, in a stable order."""
    for values in itertools.product(*AXES.values()):
        yield Case(**dict(zip(AXES, values)))


def sample_cases(count: int, seed: int, equal_only: bool = False, **fixed: object) -> list[Case]:
    """``count`` different cases drawn with ``seed``, the strategies taken in turn (an axis
    named in ``fixed`` held at that value); ``equal_only``: no cell with a documented difference."""
    rng = random.Random(seed)
    cases: list[Case] = []
    while len(cases) < count:
        values = {axis: rng.choice(choices) for axis, choices in AXES.items()}
        values["strategy"] = STRATEGIES[len(cases) % len(STRATEGIES)]
        case = Case(**{**values, **fixed})  # type: ignore[arg-type]
        if case not in cases and not (equal_only and documented_difference(case)):
            cases.append(case)
    return cases


def covering_cases(seed: int = 0, candidates: int = 20) -> list[Case]:
    """Cases in which every pair of values of two axes occurs at least once (a pairwise covering
    design, built greedily): each strategy meets every value of every other axis, and so does
    each other pair, in 41 cases instead of the product's 12,960; then the cases
    ``equal_where_possible`` adds."""
    axes = list(AXES)
    uncovered = {
        (a, va, b, vb)
        for a, b in itertools.combinations(axes, 2)
        for va in AXES[a]
        for vb in AXES[b]
    }
    rng = random.Random(seed)

    def pairs(values: dict[str, object]) -> set[tuple]:
        set_axes = [a for a in axes if a in values]
        return {(a, values[a], b, values[b]) for a, b in itertools.combinations(set_axes, 2)}

    cases: list[Case] = []
    while uncovered:
        best: dict[str, object] = {}
        for _ in range(candidates):
            a, va, b, vb = rng.choice(sorted(uncovered, key=repr))
            values: dict[str, object] = {a: va, b: vb}
            for axis in rng.sample(axes, len(axes)):
                if axis not in values:
                    values[axis] = max(
                        AXES[axis],
                        key=lambda v: (len(pairs({**values, axis: v}) & uncovered), rng.random()),
                    )
            if len(pairs(values) & uncovered) > len(pairs(best) & uncovered):
                best = values
        uncovered -= pairs(best)
        cases.append(Case(**best))  # type: ignore[arg-type]
    return cases + equal_where_possible(cases)


def equal_where_possible(cases: list[Case]) -> list[Case]:
    """For each strategy and value of another axis that ``cases`` meet only in documented
    cells, one more case with it where it must equal one process (the other axes at their
    defaults, on 2 ranks), so that a 'd' in the table means the pair cannot be equal."""
    extra: list[Case] = []
    for strategy in STRATEGIES:
        for axis, values in AXES.items():
            for value in values if axis != "strategy" else ():
                meets = [
                    c for c in cases + extra if c.strategy == strategy and getattr(c, axis) == value
                ]
                if any(documented_difference(c) is None for c in meets):
                    continue
                case = dataclasses.replace(Case(strategy=strategy), **{axis: value})
                if documented_difference(case) is None:
                    extra.append(case)
    return extra


# ---- the program: models, data, the Trainer ----------------------------------------------------
class Points(DataModule):
    """Fixed regression points, in order (no shuffling: the ranks' shares are fixed slices)."""

    def __init__(self, samples: int = 16, batch_size: int = 4) -> None:
        super().__init__()
        self.samples, self.batch_size = samples, batch_size

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(self.samples, FEATURES, generator=generator)
        y = x @ torch.randn(FEATURES, 2, generator=generator) + 0.5
        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size, shuffle=False)


class Regressor(TrainModule):
    """``linear``, ``mlp_batchnorm`` or ``buffer_unused`` (a step-counting buffer and a layer
    that never gets a gradient), trained with the named optimizer."""

    def __init__(self, model: str = "linear", optimizer: str = "sgd") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.optimizer_name = optimizer
        if model == "mlp_batchnorm":
            self.net: nn.Module = nn.Sequential(
                nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)
            )
        else:
            self.net = nn.Linear(FEATURES, 2)
        if model == "buffer_unused":
            self.unused = nn.Linear(FEATURES, 2)
            self.register_buffer("calls", torch.zeros(()))
        self.counts_calls = model == "buffer_unused"

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        if self.counts_calls:
            self.calls += 1
        return F.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        params = self.parameters()
        if self.optimizer_name == "sgd":
            return torch.optim.SGD(params, lr=0.1)
        if self.optimizer_name == "momentum":
            return torch.optim.SGD(params, lr=0.05, momentum=0.9)
        if self.optimizer_name == "adam":
            return torch.optim.Adam(params, lr=0.01)
        optimizer = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
        return [optimizer], [{"scheduler": scheduler, "interval": "step"}]


class FinalWeights(Callback):
    """At the end of the fit, every rank takes part in gathering the full weights (a collective
    for sharded strategies); global rank 0 writes them to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        weights = trainer.strategy.module_state_dict(pl_module)
        if trainer.is_global_zero:
            full = {k.removeprefix("_forward_module."): v for k, v in weights.items()}
            torch.save({k: v.detach().float().cpu() for k, v in full.items()}, self.path)


CLIP = {"none": (None, None), "norm": (0.5, "norm"), "value": (0.05, "value")}
EVAL_SAMPLES = 24  # validate/test: every rank gets as many (padding would repeat samples)
PREDICT_SAMPLES = 22  # predict: not a multiple of 4 ranks, each sample predicted once anyway


class Scored(Regressor):
    """The linear regressor, evaluated: a synced mean loss and a torchmetrics MSE per stage,
    and its predictions."""

    def __init__(self) -> None:
        super().__init__()
        from torchmetrics.regression import MeanSquaredError

        self.errors = nn.ModuleDict({"val": MeanSquaredError(), "test": MeanSquaredError()})

    def score(self, stage: str, batch: list[torch.Tensor]) -> None:
        x, y = batch
        prediction = self.net(x)
        self.log(f"{stage}_loss", F.mse_loss(prediction, y), sync_dist=True)
        self.errors[stage].update(prediction, y)
        self.log(f"{stage}_mse", self.errors[stage])

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.score("val", batch)

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.score("test", batch)

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.net(batch[0])


class EvaluationPoints(Points):
    """Points for every stage: EVAL_SAMPLES to validate and test, PREDICT_SAMPLES to predict."""

    def loader(self, samples: int) -> DataLoader:
        return Points(samples, self.batch_size).train_dataloader()

    def val_dataloader(self) -> DataLoader:
        return self.loader(EVAL_SAMPLES)

    def test_dataloader(self) -> DataLoader:
        return self.loader(EVAL_SAMPLES)

    def predict_dataloader(self) -> DataLoader:
        return self.loader(PREDICT_SAMPLES)


class IndexedPredictions(BasePredictionWriter):
    """Each rank writes its predictions with their dataset rows to ``folder/predictions-R.pt``."""

    def __init__(self, folder: Path) -> None:
        super().__init__("epoch")
        self.folder = folder

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        rows = [i for batch in batch_indices[0] for i in batch]  # one loader's batches
        values = torch.cat(list(predictions)) if predictions else torch.empty(0, 2)
        path = self.folder / f"predictions-{trainer.global_rank}.pt"
        torch.save({"rows": rows, "values": values}, path)


def evaluate(case: Case, folder: Path) -> None:
    """validate, test and predict ``case``'s untrained linear regressor on its ranks; global
    rank 0 writes the metrics to ``folder / 'metrics.pt'``."""
    trainer = Trainer(
        accelerator="cpu",
        strategy="auto" if case.strategy == "single" else case.strategy,
        devices=case.ranks,
        default_root_dir=str(folder),
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[IndexedPredictions(folder)],
    )
    model, data = Scored(), EvaluationPoints(batch_size=MICRO_BATCH)
    metrics = {"validate": trainer.validate(model, data), "test": trainer.test(model, data)}
    trainer.predict(model, data, return_predictions=False)
    if trainer.is_global_zero:
        torch.save(metrics, folder / "metrics.pt")


def fit(case: Case, folder: Path, resume_from: str | None = None) -> Path:
    """Train ``case`` (its ranks started by the Trainer's launcher where it has any); the final
    weights land in ``folder / 'weights.pt'``, every step's checkpoint under ``folder``."""
    clip_val, clip_algorithm = CLIP[case.clip]
    weights = folder / "weights.pt"
    single = case.strategy == "single"
    trainer = Trainer(
        accelerator="cpu",
        strategy="auto" if single else case.trainer_strategy(),
        devices=case.ranks,
        max_epochs=EPOCHS,
        accumulate_grad_batches=case.accumulate,
        gradient_clip_val=clip_val,
        gradient_clip_algorithm=clip_algorithm,
        batch_size_mode=case.batch_size_mode,
        sync_batchnorm=case.model == "mlp_batchnorm",
        default_root_dir=str(folder),
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[
            ModelCheckpoint(
                dirpath=str(folder / "checkpoints"), every_n_train_steps=1, save_top_k=-1
            ),
            FinalWeights(weights),
        ],
    )
    model = Regressor(case.model, case.optimizer)
    trainer.fit(model, Points(case.samples, case.loader_batch), ckpt_path=resume_from)
    return weights


def step_checkpoint(folder: Path, step: int) -> Path:
    """The checkpoint (a file, or a sharded strategy's folder) saved after optimizer step
    ``step``."""
    found = sorted((folder / "checkpoints").glob(f"*-step={step}*"))
    if not found:
        saved = sorted(p.name for p in (folder / "checkpoints").glob("*"))
        raise AssertionError(f"no checkpoint at step {step} in {folder}: {saved}")
    return found[0]


# ---- running and comparing ---------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    """What one case came to: ``equal``, ``documented`` (with why) or ``broken`` (with what)."""

    case: Case
    verdict: str
    detail: str = ""
    max_difference: float = 0.0


def run_program(case: Case, folder: Path, timeout: float, *options: str) -> Path:
    """Run ``case`` as its own program (its ranks started by trainkit's launcher; ``options``:
    ``--resume-from CHECKPOINT`` or ``--evaluate``); raises RunFailed when it fails."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(PROGRAM), case.to_json(), str(folder), *options]
    code, output = run_in_session(argv, folder, cli_env(OMP_NUM_THREADS="1"), timeout)
    if code is None:
        raise RunFailed(None, f"still running after {timeout:.0f}s: {output[-300:]}")
    if code != 0:
        raise RunFailed(code, output)
    return folder / "weights.pt"


# strategies whose ranks trainkit's launcher starts as new interpreters (they run the program),
# so the test's own interpreter can be the launching one; dp and ddp2 on one CPU node train in
# one process. ddp_spawn and ddp_fork start their ranks from the launching process, which must
# not be a pytest worker: they run as programs.
LAUNCHED_FROM_THIS_PROCESS = {"ddp", "ddp_sharded", "fsdp", "dp", "ddp2"}


def launched_from_this_process(case: Case) -> bool:
    """Whether ``run_here`` runs ``case`` from this interpreter. deepspeed is imported (and
    builds its ops) where a rank trains: a case of several ranks is launched from here, a case
    of one, which would train here, runs as a program."""
    if case.strategy.startswith("deepspeed"):
        return case.ranks > 1
    return case.strategy in LAUNCHED_FROM_THIS_PROCESS


def run_here(case: Case, folder: Path, timeout: float, *options: str) -> Path:
    """``run_program``, with this interpreter as the launching process where the strategy
    allows it (its ranks run the program); raises RunFailed when it fails."""
    if not launched_from_this_process(case):
        return run_program(case, folder, timeout, *options)
    from tests.helpers.in_process import command_state
    from trainkit.cli.command import exit_code
    from trainkit.distributed.launchers.rank_command import ranks_run

    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(PROGRAM), case.to_json(), str(folder), *options]
    resume_from = options[1] if options[:1] == ("--resume-from",) else None
    code = 0
    with command_state(folder, cli_env(OMP_NUM_THREADS="1")), ranks_run(command), one_thread():
        try:
            if "--evaluate" in options:
                evaluate(case, folder)
            else:
                fit(case, folder, resume_from)
        except SystemExit as stop:  # the launcher ends with its ranks' exit code
            code = exit_code(stop.code)
    if code != 0:
        raise RunFailed(code, "the ranks' output is in the test's captured output")
    return folder / "weights.pt"


class RunFailed(Exception):
    """A case's program exited with an error: its exit code (None: stopped) and output."""

    def __init__(self, returncode: int | None, output: str) -> None:
        self.returncode, self.output = returncode, output
        last = output.strip().splitlines()[-1:] or [""]
        super().__init__(f"rc {returncode}: {last[0][:300]}")

    @property
    def one_line_refusal(self) -> bool:
        """Exit 2 with one ``trainkit: error:`` line and no traceback, as the CLI refuses."""
        errors = [line for line in self.output.splitlines() if line.startswith("trainkit: error:")]
        return self.returncode == 2 and len(errors) == 1 and "Traceback" not in self.output


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    if a.keys() != b.keys():
        raise AssertionError(f"different weights: {sorted(a)} vs {sorted(b)}")
    return max(float((a[k] - b[k]).abs().max()) for k in a)


RTOL, ATOL = 1e-6, 1e-6  # fp32: the order of the reductions is the only difference
# a resumed run equals the uninterrupted one to the bit on 1 and 2 ranks; on 4 it may differ by
# a rounding (7.5e-9 measured, SGD with accumulation: docs/strategies.md, "Equivalence")
RESUME_GAP_4_RANKS = 1e-7


def compare(case: Case, weights: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]):
    """``equal`` when every weight is within RTOL/ATOL of the reference, else ``broken``."""
    worst = max_difference(weights, reference)
    for key, value in reference.items():
        if not torch.allclose(weights[key], value, rtol=RTOL, atol=ATOL):
            return Outcome(case, "broken", f"{key} differs by up to {worst:.3g}", worst)
    return Outcome(case, "equal", "", worst)


def run_case(case: Case, folder: Path, references: dict[Case, dict], timeout: float) -> Outcome:
    """Train ``case`` and its reference (made once per reference, kept in ``references``) and
    compare them; a resumed case is also compared to its own uninterrupted run. A documented
    difference is checked by its relation instead."""
    difference = documented_difference(case)
    if difference is not None and difference.relation == "refused":
        try:
            run_program(case, folder / "run", timeout)
        except RunFailed as failed:
            if failed.one_line_refusal:
                return Outcome(case, "documented", difference.why)
            return Outcome(case, "broken", f"not refused in one line: {failed}")
        return Outcome(case, "broken", f"expected a refusal ({difference.why}), but it trained")
    try:
        reference = reference_weights(case.reference(), folder.parent, references)
        straight = torch.load(run_here(case, folder / "run", timeout), weights_only=True)
        if case.resume:
            mid = step_checkpoint(folder / "run", RESUME_STEP)
            path = run_here(case, folder / "resumed", timeout, "--resume-from", str(mid))
            resumed = torch.load(path, weights_only=True)
            gap = max_difference(resumed, straight)
            if gap > (0 if case.ranks <= 2 else RESUME_GAP_4_RANKS):
                return Outcome(case, "broken", f"resumed != uninterrupted by {gap:.3g}", gap)
    except RunFailed as failed:
        return Outcome(case, "broken", str(failed))
    if difference is None:
        return compare(case, straight, reference)
    if difference.relation == "equal_but":
        only = {k: v for k, v in straight.items() if not k.startswith(difference.differ)}
        outcome = compare(case, only, {k: reference[k] for k in only})
    else:  # finite
        finite = all(bool(v.isfinite().all()) for v in straight.values())
        outcome = Outcome(case, "equal" if finite else "broken", "" if finite else "not finite")
    if outcome.verdict == "broken":
        return outcome
    return Outcome(case, "documented", difference.why, outcome.max_difference)


def reference_weights(
    reference: Case, folder: Path, references: dict[Case, dict]
) -> dict[str, torch.Tensor]:
    """The weights of the one-process ``reference``, trained once (in this process) and kept in
    ``references``."""
    if reference not in references:
        with one_thread():
            path = fit(reference, folder / f"reference-{reference.name}")
        references[reference] = torch.load(path, weights_only=True)
    return references[reference]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for the block, as the programs run (OMP_NUM_THREADS=1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def evaluation(folder: Path) -> tuple[dict, list[int], torch.Tensor]:
    """The metrics of an evaluating run, and its predictions' rows and values (every rank's,
    put together)."""
    metrics = torch.load(folder / "metrics.pt", weights_only=True)
    rows: list[int] = []
    values = []
    for path in sorted(folder.glob("predictions-*.pt")):
        written = torch.load(path, weights_only=True)
        rows += written["rows"]
        values.append(written["values"])
    return metrics, rows, torch.cat(values)


def run_evaluation(case: Case, folder: Path, timeout: float) -> Outcome:
    """validate/test/predict on ``case``'s ranks against one process: the same metrics (synced
    means, torchmetrics), and every sample predicted once, to the same values."""
    try:
        (folder / "reference").mkdir(parents=True)
        with one_thread():  # the one process: this one
            evaluate(case.reference(), folder / "reference")
        run_here(case, folder / "run", timeout, "--evaluate")
    except RunFailed as failed:
        return Outcome(case, "broken", str(failed))
    expected, expected_rows, expected_values = evaluation(folder / "reference")
    metrics, rows, values = evaluation(folder / "run")
    if sorted(rows) != list(range(PREDICT_SAMPLES)):
        return Outcome(case, "broken", f"predicted rows {sorted(rows)}, not each row once")
    in_order = values[torch.tensor(rows).argsort()]
    worst = float((in_order - expected_values[torch.tensor(expected_rows).argsort()]).abs().max())
    for stage, results in expected.items():
        for key, value in results[0].items():
            got = metrics[stage][0].get(key)
            if got is None or abs(got - value) > RTOL * abs(value) + ATOL:
                return Outcome(case, "broken", f"{stage} {key}: {got} vs {value}", worst)
    if worst > ATOL:
        return Outcome(case, "broken", f"predictions differ by up to {worst:.3g}", worst)
    return Outcome(case, "equal", "", worst)
