"""The command line is made from the Configs (basics/cli_options.py): every option of every command says what it does
and its default in --help, every spelled field has a docstring (its help), and an empty command line gives the
Config's own defaults (the parser has none of its own to drift from them)."""

import argparse

import pytest

from ddplab.basics import cli_options
from ddplab import commands
from ddplab.cli import build_parser
from ddplab.errors import UsageError


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _parser_of(name: str) -> argparse.ArgumentParser:
    if name == "launch":  # every word after `launch` is torchrun's parser's, with ddplab's options in a group
        from ddplab.commands import launch

        return launch.build_parser()
    return _subparsers()[name]


def _ours(name: str, action: argparse.Action) -> bool:
    if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
        return False
    if name == "launch":  # torchrun's own options are torchrun's to document
        from ddplab.commands import launch

        return any(s in launch.DDPLAB_OPTIONS for s in action.option_strings)
    return True


@pytest.mark.parametrize("name", list(commands.COMMANDS))
def test_every_option_of_every_command_says_what_it_does_and_its_default(name):
    parser = _parser_of(name)
    text = "".join(parser.format_help().split())  # argparse wraps lines, at hyphens too
    ours = [a for a in parser._actions if _ours(name, a)]
    assert ours, f"ddplab {name} has no options of its own"
    for action in ours:
        help_text = " ".join((action.help or "").split()).replace("%%", "%")
        assert len(help_text) > 10, f"ddplab {name} {action.option_strings or action.metavar}: no help"
        assert "".join(help_text.split()) in text, f"ddplab {name} --help lacks {action.option_strings or action.metavar}"
        if action.option_strings:  # a positional argument is required: it has no default
            assert "default" in help_text, f"ddplab {name} {action.option_strings[0]}: no default in {help_text!r}"
            assert all(s in text for s in action.option_strings)
        assert all(s in text for s in action.option_strings)


def _configs() -> list[type]:
    from ddplab.lab import clean, run as lab
    from ddplab import measurements
    from ddplab.check.config import CheckConfig
    from ddplab.records.config import LaunchOptions
    from ddplab.job.config import UserJobConfig
    from ddplab.records.compare import CompareConfig

    return [LaunchOptions, CheckConfig, UserJobConfig, CompareConfig, lab.RunConfig, clean.CleanConfig,
            *(measurements.get(name).Config for name in measurements.MEASUREMENTS)]


@pytest.mark.parametrize("config_cls", _configs(), ids=lambda c: c.__name__)
def test_every_spelled_field_has_a_docstring_and_each_value_of_a_one_of_its_clause(config_cls):
    for f, spelling, slot in cli_options.slots(config_cls):
        if isinstance(spelling, cli_options.Nested):
            continue
        assert len(slot.doc) > 10, f"{config_cls.__name__}.{f.name} has no docstring under it"
        if isinstance(spelling, cli_options.OneOf):
            for value in (slot.default, *spelling.flags):
                assert cli_options.clause(slot.doc, value)


# What each command needs besides its options.
REQUIRED = {"drill": ["kill_rank"], "pairwise": ["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400"]}


@pytest.mark.parametrize("name", ["train", "storm", "sweep", "ceiling", "contention", "env", "drill", "pairwise",
                                  "clean", "run"])
def test_a_command_line_without_options_gives_the_configs_own_defaults(name, monkeypatch):
    for variable in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(variable, raising=False)
    module = commands.load(name)
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    config = module.config_from_args(parser.parse_args(REQUIRED.get(name, [])))
    from ddplab.records.config import LaunchOptions

    given = {"drill": {"drills": ("kill_rank",)},
             "pairwise": {"launch": LaunchOptions(nproc=1, nnodes=2, rdzv_endpoint="127.0.0.1:29400")}}
    assert config == type(config)(**given.get(name, {}))
    assert name != "pairwise" or config.launch.nproc == 1  # the command's own default: one rank per machine


def test_a_nested_configs_defaults_are_its_commands():
    from ddplab.measurements.drill import DrillConfig

    parser = argparse.ArgumentParser()
    commands.load("drill").add_arguments(parser)
    timeout = next(a for a in parser._actions if "--timeout" in a.option_strings)
    assert "(default: 10)" in timeout.help and "hang timeout" in timeout.help
    assert DrillConfig(drills=("kill_rank",)).launch.timeout_s == 10.0


def test_a_field_checks_its_range_and_choices_as_its_option_does():
    from ddplab.measurements.train import TrainConfig

    with pytest.raises(UsageError) as err:
        TrainConfig(model="resnet")
    assert err.value.reference == "invalid-model" and "linear, mlp" in err.value.message
    with pytest.raises(UsageError) as err:
        TrainConfig(steps=0)
    assert err.value.message == "--steps 0 is out of range; valid: 1 to 1000000"


def test_the_help_says_a_default_once():
    assert cli_options.help_text("Seconds before a hang; default: off.", "none") == "Seconds before a hang; default: off."
    assert cli_options.help_text("Timed iterations per size.", "20") == "Timed iterations per size (default: 20)."
    assert cli_options.help_text("Allowed slowdown.", "5%") == "Allowed slowdown (default: 5%%)."  # argparse's %


def test_the_help_is_the_docstrings_first_paragraph_as_a_sentence():
    doc = "every rank on device 0\n\nprofiles.py says how: for developers, not in the help."
    assert cli_options.help_text(doc, "auto") == "Every rank on device 0 (default: auto)."
    assert cli_options.help_text("quick: every stage, CI-sized", None) == "quick: every stage, CI-sized."
