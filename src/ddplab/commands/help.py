"""Every command's --help, made the same way: the description is the first paragraph of the command module's
docstring (what a user reads; notes for developers follow it), then its EXAMPLES (one to three command lines,
each with what it does) and the exit codes, one epilog for all commands (errors.EXIT_CODE_MEANINGS)."""

from __future__ import annotations

import argparse
import re

from ..errors import EXIT_CODE_MEANINGS


def description(module) -> str:
    """The first paragraph of the command module's docstring, on one line."""
    return " ".join(module.__doc__.strip().split("\n\n")[0].split())


def help_epilog(module=None) -> str:
    """The command's examples (none for ``ddplab --help`` itself), then the exit codes every command shares."""
    return (f"{examples(module.EXAMPLES)}\n\n" if module is not None else "") + EXIT_CODES


def examples(lines) -> str:
    """Each example with what it does beside it, or under it where the commands are long."""
    width = max(len(command) for command, _ in lines)
    if width <= 48:
        return "examples:\n" + "\n".join(f"  {command.ljust(width)}   # {what}" for command, what in lines)
    return "examples:\n" + "\n".join(f"  {command}\n      # {what}" for command, what in lines)


EXIT_CODES = ("exit codes:\n" + "".join(f"  {int(code):<4} {meaning}\n" for code, meaning in EXIT_CODE_MEANINGS.items())
              + "  `ddplab check --format nagios` and `--format npd` answer in the runner's own codes (see --format).")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, except that the description and the epilog keep their paragraphs, and lines indented by two
    spaces (examples, the exit codes) stay as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.split("\n")
            if all(not line or line.startswith("  ") for line in lines[1:]) and len(lines) > 1:
                out.append("\n".join(indent + line for line in lines))  # a heading and its indented lines
            else:
                out.append(super()._fill_text(re.sub(r"\s+", " ", paragraph), width, indent))
        return "\n\n".join(out)
