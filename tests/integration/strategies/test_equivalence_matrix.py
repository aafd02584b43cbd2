"""Every strategy computes what one process computes: N ranks with b samples each train to the
weights of one process given the N*b samples, and a run resumed from a mid-epoch checkpoint to
the weights of the run never stopped. The cases are drawn (a fixed seed) from the matrix of
tests/helpers/equivalence.py: strategy x ranks x accumulation x optimizer x clipping x resume x
batch-size mode x model; ``scripts/check_equivalence.py --all`` covers every pair of its values.
A cell that cannot be equal is refused in one line or differs as docs/strategies.md says.
validate, test and predict on N ranks give one process's metrics and predictions."""

from __future__ import annotations

import pytest

from tests.helpers.equivalence import (
    STRATEGIES,
    Case,
    documented_difference,
    run_case,
    run_evaluation,
    sample_cases,
)

# each strategy once on 2 ranks, the other axes drawn among the cells that must be equal; one
# case on 4 ranks; deepspeed as a process of one; sharded's global-norm clipping (the refusals
# are checked without ranks in tests/unit/strategies/test_base.py, and by --all)
SAMPLE = [
    *sample_cases(len(STRATEGIES), seed=46, equal_only=True, ranks=2),
    Case("ddp", ranks=4, accumulate=3, optimizer="adamw_scheduler", clip="norm", resume=True),
    Case("deepspeed_stage_3", ranks=1, accumulate=2, optimizer="momentum", clip="norm"),
    Case("ddp_sharded", accumulate=2, optimizer="adam", clip="norm"),  # OSS clips the global norm
]
REFERENCES: dict = {}  # one-process runs, shared by the cases of this worker


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", SAMPLE, ids=lambda case: case.name)
def test_n_ranks_train_to_the_weights_of_one_process_with_the_whole_batch(case, tmp_path):
    outcome = run_case(case, tmp_path, REFERENCES, timeout=480)
    documented = documented_difference(case)
    assert outcome.verdict == ("documented" if documented else "equal"), outcome.detail
    if documented is not None:
        assert outcome.detail == documented.why
    if documented is None:
        assert outcome.max_difference <= 1e-5


def test_the_sample_covers_every_strategy_and_resumes():
    assert {case.strategy for case in SAMPLE} == set(STRATEGIES)
    assert any(case.resume for case in SAMPLE) and any(case.accumulate > 1 for case in SAMPLE)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "case",
    [Case("ddp", ranks=4)],  # 22 predictions over 4 ranks: no padding repeats
    ids=lambda case: f"{case.strategy}-{case.ranks}r",
)
def test_evaluation_on_n_ranks_gives_the_one_process_metrics_and_predictions(case, tmp_path):
    outcome = run_evaluation(case, tmp_path, timeout=480)
    assert outcome.verdict == "equal", outcome.detail
