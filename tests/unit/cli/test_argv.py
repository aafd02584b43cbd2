"""Device specs reach the resolver with the type the user wrote: in a config file ``"0"`` is an
id string (the first GPU) and ``0`` a count; on the command line ``2`` is a count, ``'"0"'`` and
``0,`` id strings. On CPU a count is a number of processes and ids are an error."""

from __future__ import annotations

import pytest

from trainkit.cli.command import build_parser, typed_device_options


def parsed_trainer(tmp_path, yaml_text: str | None, *args: str):
    parser = build_parser("trainkit fit", None, None, "fit")
    config = ["--model", "trainkit.demos.autoencoder.AutoEncoder"]
    if yaml_text is not None:
        path = tmp_path / "devices.yaml"
        path.write_text(yaml_text)
        config += ["-c", str(path)]
    return parser.parse_args(typed_device_options([*config, *args])).trainer


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ('trainer: {devices: "0"}', "0"),
        ("trainer: {devices: 0}", 0),
        ("trainer: {devices: 2}", 2),
        ('trainer: {devices: "1,3"}', "1,3"),
        ("trainer: {devices: [0, 1]}", [0, 1]),
        ('trainer: {devices: "-1"}', "-1"),
        ("trainer: {devices: -1}", -1),
    ],
)
def test_a_config_file_keeps_the_type_it_wrote(tmp_path, yaml_text, expected):
    devices = parsed_trainer(tmp_path, yaml_text).devices
    assert devices == expected and type(devices) is type(expected)


def test_gpus_in_a_config_file_keep_their_string_form(tmp_path):
    assert parsed_trainer(tmp_path, 'trainer: {gpus: "0"}').gpus == "0"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("2", 2), ("0", 0), ('"0"', "0"), ("0,", "0,"), ("1,3", "1,3"), ("[0, 1]", [0, 1])],
)
def test_the_command_line_reads_values_as_yaml(tmp_path, typed, expected):
    for args in (["--trainer.devices", typed], [f"--trainer.devices={typed}"]):
        devices = parsed_trainer(tmp_path, None, *args).devices
        assert devices == expected and type(devices) is type(expected)


def test_the_command_line_overrides_a_file_and_a_later_file_overrides_it(tmp_path):
    assert (
        parsed_trainer(tmp_path, 'trainer: {devices: "0"}', "--trainer.devices", "2").devices == 2
    )
    other = tmp_path / "later.yaml"
    other.write_text('trainer: {devices: "1"}')
    trainer = parsed_trainer(tmp_path, None, "--trainer.devices", "2", "-c", str(other))
    assert trainer.devices == "1"


def test_other_trainer_options_survive_a_device_option(tmp_path):
    trainer = parsed_trainer(
        tmp_path, "trainer: {max_epochs: 7}", "--trainer.devices", "2", "--trainer.max_steps", "9"
    )
    assert (trainer.max_epochs, trainer.max_steps, trainer.devices) == (7, 9, 2)
