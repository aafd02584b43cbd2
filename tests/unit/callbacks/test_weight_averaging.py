"""WeightAveraging and EMAWeightAveraging: the average follows torch's AveragedModel over the
weights after each chosen step; validation and the end of fit use it; checkpoints hold it and a
resumed fit continues both the average and the trained weights."""

from __future__ import annotations

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn

from tests.helpers.models import Regression, regression_loader
from trainkit import Callback, ModelCheckpoint
from trainkit.callbacks import EMAWeightAveraging, WeightAveraging


class Snapshots(Callback):
    """The module's weights after every optimizer step."""

    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.weights.append(pl_module.layer.weight.detach().clone())


class SeesValidationWeights(Regression):
    def __init__(self) -> None:
        super().__init__()
        self.validated_with: list[torch.Tensor] = []

    def on_validation_epoch_start(self) -> None:
        self.validated_with.append(self.layer.weight.detach().clone())


def expected_average(
    snapshots: list[torch.Tensor], decay: float, chosen: list[int]
) -> torch.Tensor:
    holder = torch.nn.Linear(4, 1, bias=False)
    average = AveragedModel(holder, avg_fn=get_ema_avg_fn(decay))
    for index in chosen:
        holder.weight.data.copy_(snapshots[index])
        average.update_parameters(holder)
    return average.module.weight.detach()


def test_ema_averages_the_chosen_steps_and_validation_uses_it(make_trainer):
    snapshots = Snapshots()
    ema = EMAWeightAveraging(decay=0.5, update_every_n_steps=2, update_starting_at_step=1)
    model = SeesValidationWeights()
    trainer = make_trainer(max_epochs=2, callbacks=[snapshots, ema], limit_val_batches=1)
    trainer.fit(model, regression_loader(), regression_loader(n=8))
    steps = len(snapshots.weights)  # 8 a epoch
    chosen = [i for i in range(steps) if i >= 1 and i % 2 == 0]
    average = expected_average(snapshots.weights, 0.5, chosen)
    assert torch.allclose(model.layer.weight, average)  # the end of fit: the average
    first_epoch = expected_average(snapshots.weights, 0.5, [i for i in chosen if i < 8])
    assert torch.allclose(model.validated_with[0], first_epoch)
    assert not torch.allclose(model.validated_with[0], snapshots.weights[7])


def test_training_continues_from_the_trained_weights_after_validation(make_trainer):
    snapshots = Snapshots()
    model = SeesValidationWeights()
    trainer = make_trainer(max_epochs=2, callbacks=[snapshots, WeightAveraging()])
    trainer.fit(model, regression_loader(), regression_loader(n=8))
    # the second epoch starts from the first's trained weights, not the validated average
    assert not torch.allclose(model.validated_with[0], snapshots.weights[7])
    holder = torch.nn.Linear(4, 1, bias=False)
    average = AveragedModel(holder)  # the default: an equal-weight mean (SWA)
    for weights in snapshots.weights:
        holder.weight.data.copy_(weights)
        average.update_parameters(holder)
    assert torch.allclose(model.layer.weight, average.module.weight)


def test_checkpoints_hold_the_average_and_a_resumed_fit_continues_it(make_trainer, tmp_path):
    def run(max_epochs: int, ckpt_path: str | None = None) -> Regression:
        torch.manual_seed(0)
        model = Regression()
        checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
        trainer = make_trainer(
            max_epochs=max_epochs,
            enable_checkpointing=True,
            callbacks=[EMAWeightAveraging(decay=0.9), checkpoint],
        )
        trainer.fit(model, regression_loader(), ckpt_path=ckpt_path)
        return model

    run(1)
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert set(saved["averaging_state"]) == {"n_averaged"}
    assert not torch.equal(
        saved["state_dict"]["layer.weight"], saved["current_model_state"]["layer.weight"]
    )
    resumed = run(2, str(tmp_path / "ckpt" / "last.ckpt"))
    straight = run(2)
    assert torch.allclose(resumed.layer.weight, straight.layer.weight)
