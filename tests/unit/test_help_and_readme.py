"""What people read before they run anything: every --help (complete sentences, no ddplab file or function named,
one to three examples that parse, the exit codes every command shares), and the README's stated defaults, each
held to the code."""

import argparse
import re
from pathlib import Path

import pytest

from ddplab import commands
from ddplab.cli import build_parser
from ddplab.commands import help as command_help
from ddplab.errors import EXIT_CODE_MEANINGS

ROOT = Path(__file__).resolve().parents[2]
README = " ".join((ROOT / "README.md").read_text().split())  # one line: a claim may wrap
# ddplab's own modules, as a help text would name one of them ("lab/profiles.py", "procs.refuse_to_name").
MODULES = sorted({p.stem for p in (ROOT / "src" / "ddplab").rglob("*.py") if p.stem != "__init__"}, key=len,
                 reverse=True)
INTERNAL = re.compile(rf"\b(?:{'|'.join(MODULES)})\.(?!json\b|html\b|txt\b|toml\b|xml\b|prom\b)[a-z_]+"
                      r"|\b(?:measurements|supervision|records|platform|workloads|drills)/")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parsers = dict(sub.choices)
    parsers["launch"] = commands.load("launch").build_parser()  # torchrun's parser reads launch's words
    return parsers


PARSERS = _parsers()


def _ours(name: str, action: argparse.Action) -> bool:
    """An option ddplab wrote the help of (launch's others are torchrun's, in torch's words)."""
    return action.dest != "help" and (name != "launch" or action.dest.startswith("ddplab_"))


@pytest.mark.parametrize("name", list(commands.COMMANDS))
def test_every_help_is_sentences_without_ddplab_internals(name):
    parser = PARSERS[name]
    assert parser.description.endswith(".") and parser.description[0].isupper(), parser.description
    texts = [parser.description, *(a.help for a in parser._actions
                                   if _ours(name, a) and a.help and a.help != argparse.SUPPRESS)]
    for text in texts:
        assert not INTERNAL.search(text), f"{name}: {text!r} names ddplab's internals"
        assert "(None)" not in text and text.rstrip().endswith("."), f"{name}: {text!r}"
    page = parser.format_help()
    assert "examples:" in page and page.rstrip().endswith(command_help.EXIT_CODES.rstrip()), page[-800:]


@pytest.mark.parametrize("name", list(commands.COMMANDS))
def test_each_command_shows_one_to_three_examples_that_parse(name):
    module = commands.load(name)
    assert 1 <= len(module.EXAMPLES) <= 3
    for line, what in module.EXAMPLES:
        words = line.split()
        words = words[words.index("ddplab"):]  # after a launcher's own words (srun ...)
        assert words[1] == name and what and not what.endswith("."), line
        if name == "launch":
            args = PARSERS["launch"].parse_args(words[2:])
            assert args.training_script == "train.py", line
        else:
            PARSERS[name].parse_args(words[2:])  # argparse exits 2 on an example it cannot read


def test_an_off_switch_says_what_it_does_not_what_it_turns_off():
    storm = {a.option_strings[0]: a.help for a in PARSERS["storm"]._actions if a.option_strings}
    assert storm["--no-sample"] == "Measure without sampling, to see what the sampler itself costs (default: off)."


def test_the_exit_codes_in_the_readme_are_the_ones_every_help_shows():
    for code, meaning in EXIT_CODE_MEANINGS.items():
        assert f"`{int(code)}` {meaning}" in README, (int(code), meaning)
        assert f"{int(code):<4} {meaning}" in command_help.EXIT_CODES


# -- the README's numbers: each default it states is the code's -------------------------------------------------

def _default_in_help(command: str, flag: str) -> str:
    action = next(a for a in PARSERS[command]._actions if flag in a.option_strings)
    found = re.search(r"\(default: ([^)]*)\)", action.help)
    assert found, f"ddplab {command} {flag} has no single default: the README must not show one ({action.help})"
    return found.group(1).replace("%%", "%")  # argparse's escape


def _synopses() -> list[tuple[str, str, str]]:
    """(command, option, value) for every option the README's command table shows with a value (not a NAME)."""
    rows = re.findall(r"\| `ddplab (\w+) ([^`]*)` \|", README)
    out = []
    for command, synopsis in rows:
        for optional in re.findall(r"\[([^\]]*)\]", synopsis):  # a synopsis's [options], not a command run
            for flag, value in re.findall(r"(?<![\w-])(-{1,2}[a-zA-Z][\w-]*) ([^\s\[\]]+)", optional):
                if "\\|" in value or "..." in value or re.fullmatch(r"[A-Z_:]+", value) or value.startswith("-"):
                    continue  # a choice, a list, a metavar, or the next option
                out.append((command, flag, value))
    return out


SYNOPSES = _synopses()


def test_the_readme_command_table_shows_values():
    assert ("storm", "--iters", "10000") in SYNOPSES and ("sweep", "-e", "64M") in SYNOPSES


@pytest.mark.parametrize("command, flag, value", SYNOPSES, ids=[" ".join(s) for s in SYNOPSES])
def test_a_value_in_the_readme_command_table_is_the_options_default(command, flag, value):
    assert _default_in_help(command, flag) == value


def _claims():
    """What the README's prose says a default is, and what the code says. Each is found in the README as written."""
    from ddplab.lab import profiles
    from ddplab.records.config import DEFAULT_RESERVE
    from ddplab.job import run as launch_job
    from ddplab.job.config import DEFAULT_HANG_TIMEOUT_S
    from ddplab.job.supervise import SAMPLE_INTERVAL_S
    from ddplab.platform.vendors import VENDORS
    from ddplab.basics.rundir import DEFAULT_RUNS_DIR
    from ddplab.basics.sizes import parse_size
    from ddplab.basics.validators import number_text

    ras = next(v.ras for v in VENDORS.values() if v.ras)
    return [
        (r"`--hang-timeout S`: declare a hang [^(]*\(default (\d+), 0 for off\)", number_text(DEFAULT_HANG_TIMEOUT_S)),
        (r"`--out DIR`: the job directory \(default `([^`]+)`\)", f"./{DEFAULT_RUNS_DIR}/{launch_job.NAME}-<id>"),
        (r"\(reserve ([\d.]+): [\d.]+ for two ranks", f"{DEFAULT_RESERVE:.2f}"),
        (r"\(reserve [\d.]+: ([\d.]+) for two ranks", f"{(1 - DEFAULT_RESERVE) / 2:.2f}"),
        (r"at `\$NCCL_RAS_ADDR` or `([^`]+)`", ras.default_address),
        (r"\*\*Watching\.\*\* Every ([\d.]+) s", number_text(SAMPLE_INTERVAL_S)),
        (r"\(WARNING beyond (\d+%)\)", _default_in_help("check", "--tolerance")),
        (r"\(default (\d+) s from ddplab's start", _default_in_help("check", "--deadline")),
        (r"its sweeps stop at (\d+ MiB) instead of", f"{parse_size(profiles.HOST_STAGED_MAX) >> 20} MiB"),
        (r"its sweeps stop at \d+ MiB instead of (\d+ GiB)", f"{parse_size(profiles.FULL_MAX) >> 30} GiB"),
    ]


def test_every_default_the_readme_states_in_prose_is_the_codes():
    for pattern, expected in _claims():
        found = [m for m in re.finditer(pattern, README) if m.lastindex]
        assert found, f"the README no longer says {pattern!r}: update the claim with the text"
        assert all(m.group(1) == expected for m in found), (pattern, [m.group(1) for m in found], expected)


def test_no_default_the_readme_states_goes_unchecked():
    """A number within a few words after "default" is a stated default: one of the claims above must read it."""
    claimed = [m.span(1) for pattern, _ in _claims() for m in re.finditer(pattern, README) if m.lastindex]
    for said in re.finditer(r"\bdefault\b\W{0,3}(?:\w+\W+){0,3}?(\d[\w.%/<>-]*)", README, re.IGNORECASE):
        start = said.start(1)
        assert any(a <= start < b or abs(a - start) < 40 for a, b in claimed), \
            f"the README states a default no test holds: {README[said.start():said.end() + 40]!r}"
