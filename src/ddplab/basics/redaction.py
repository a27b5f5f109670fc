"""Keep secrets out of everything ddplab writes.

Reports travel (they are attached to bug reports), and a job directory is read by whoever can read the disk, so
anything copied from the machine or the command line into them is withheld when its NAME says it is a secret or
its VALUE looks like a credential, whatever let it through. One set of rules for environment variables
(``redact``), command lines (``redact_argv``), free text (``redact_text``) and this process's own secrets wherever
they appear again (``learn``, ``withhold_known``): docs/exposure.md, "Secrets in reports", says which names are
secret and what each one withholds. The rules err on the side of hiding (``--sort-key length`` is withheld): a
withheld ordinary value costs less than a leaked key.

Every rule runs in time linear in its input: no pattern starts again inside a word it already read, and nothing
recurses on what it found.
"""

from __future__ import annotations

import html
import json
import re
from typing import Iterable, Mapping

REDACTED = "[redacted]"

# One word of a name (lower case) that makes it secret.
_SECRET_WORD = re.compile(r"""
      [a-z0-9]*(?:token|secrets?|passwords?|passwd|passphrase|credentials?|cookies?)  # hftoken, clientsecret
    | (?:api|access|secret|private|auth|master|session|signing|encryption|ssh|pass)?key  # not monkey, hotkey
    | (?:api)?auth|authorization|pwd|pw|pass|session(?:id)?
""", re.VERBOSE)
# Short options whose value is a password by long custom (mysql -p, sshpass -p): one letter has no words to read.
SECRET_SHORT_OPTIONS = frozenset({"-p"})
# The last word of a name whose value points at a secret instead of holding it.
_POINTER_WORDS = frozenset({"file", "files", "path", "paths", "dir", "directory", "filename", "name", "env", "var"})
# The last word of a name that says it is a Python exception or warning: ``KeyError: 'placement'`` in a traceback
# names the missing key, which is no secret (the text of a KeyError, a KeyboardInterrupt, a TokenError).
_NOT_A_VALUE_WORDS = frozenset({"error", "exception", "warning", "interrupt"})
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

# Values that are credentials whatever they are called: the shapes of well-known token formats. A shape that
# may fail after reading a long run (the JSON Web Token's) starts only where such a run starts.
_CREDENTIAL_SHAPES = (
    r"\bhf_[A-Za-z0-9]{8,}",  # Hugging Face access token
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained token
    r"\bsk-[A-Za-z0-9_-]{16,}",  # API secret keys (OpenAI, Anthropic, Stripe ...)
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack token
    r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?",  # JSON Web Token
)
_CREDENTIAL = re.compile("|".join(f"(?:{shape})" for shape in _CREDENTIAL_SHAPES))
# scheme://user:password@host: the password goes, the user and host stay. A scheme is read from the start of its
# run of scheme characters (digits before its first letter are no part of it), never again from inside the run.
_URL_PASSWORD = re.compile(r"(?<![A-Za-z0-9+.-])(?P<head>[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)"
                           r"(?P<password>[^/\s@]+)@")
# name=value or name: value inside text (a query string, a JSON or config fragment): withheld when the name is
# secret (``secret_name``); an HTTP authorization scheme before the value (``Authorization: Basic X``) is kept.
# A name is read from the start of its run of name characters (what precedes its first letter is no part of it).
_NAMED_HEAD = re.compile(r"""(?<![\w.-])(?:(?![A-Za-z_])[\w.-])*(?P<name>[A-Za-z_][\w.-]*)"""
                         r"""(?P<sep>['"]?\s*[=:]\s*['"]?)""")
_NAMED_VALUE = re.compile(r"""(?P<scheme>(?i:bearer|basic|token|digest)\s+)?(?P<value>[^\s&'",;}]+)""")
# An argument that is an option name (``--api-key``) or a ``name=value`` override (``--token=X``, ``+db.pwd=X``).
_OPTION = re.compile(r"-{1,2}[A-Za-z_][\w.-]*")
_OVERRIDE_NAME = re.compile(r"[-+~]*[A-Za-z_][\w.-]*")

# A secret this short is not looked for in other text: it would be found inside ordinary words
# (XDG_SESSION_TYPE=tty, --auth-type basic). It is still withheld where it stands (its flag, its variable).
MIN_KNOWN_CHARS = 8
# Variables the system sets whose names read as secret but whose values are places, not secrets: looked for
# elsewhere, PWD alone would withhold every path under the working directory.
_PLACES_NOT_SECRETS = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "SESSION_MANAGER", "DBUS_SESSION_BUS_ADDRESS",
                                 "DESKTOP_SESSION", "GNOME_KEYRING_CONTROL"})
_PLACES_PREFIXES = ("XDG_SESSION_",)


def secret_name(name: str) -> bool:
    """Does this variable's, option's or key's name say its value is a secret (docs/exposure.md)?"""
    words = [w.lower() for w in _WORD_BREAK.split(name) if w]
    if not words or words[-1] in _POINTER_WORDS or words[-1] in _NOT_A_VALUE_WORDS:
        return False
    return any(_SECRET_WORD.fullmatch(w) for w in words)


def _secret_flag(name: str) -> bool:
    return name in SECRET_SHORT_OPTIONS or secret_name(name)


def redact(name: str, value: str) -> str:
    """An environment variable's ``value`` as it may appear in a report: itself, or REDACTED."""
    return REDACTED if secret_name(name) or redact_text(value) != value else value


def redact_text(text: str) -> str:
    """``text`` with this process's known secrets, every credential-shaped part, and every value of a
    secret-named ``name=value``, withheld."""
    return _redact_text(withhold_known(text), None)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line as a report may show it: the value after a secret-named flag, this process's known secrets
    and every credential-shaped value withheld, everything else as typed. The argument after a secret-named flag
    is its value unless it is a long option: a secret may begin with a dash (``--use-auth -v`` withholds ``-v``)."""
    return _redact_argv([withhold_known(str(arg)) for arg in argv], None)


def redact_json(value):
    """A JSON value (as json.load gives it) with ``redact_text`` applied to every string in it."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_json(v) for k, v in value.items()}
    return value


def _redact_text(text: str, withheld: list[str] | None) -> str:
    """The rules on ``text``; what they withheld is added to ``withheld`` (when given)."""

    def credential(m: re.Match) -> str:
        _note(withheld, m.group())
        return REDACTED

    def password(m: re.Match) -> str:
        _note(withheld, m["password"])
        return f"{m['head']}{REDACTED}@"

    text = _CREDENTIAL.sub(credential, text)
    text = _URL_PASSWORD.sub(password, text)
    return _withhold_named_values(text, withheld)


def _withhold_named_values(text: str, withheld: list[str] | None) -> str:
    """Each secret-named ``name=value``'s value withheld. The scan goes on right after each name's separator, so
    a pair inside an ordinary one's value (``url: http://h/?token=X``) is found too, in one pass."""
    out, done = [], 0
    for head in _NAMED_HEAD.finditer(text):
        if head.start() < done or not secret_name(head["name"]):
            continue
        value = _NAMED_VALUE.match(text, head.end())
        if value is None:
            continue
        _note(withheld, value["value"])
        out += [text[done:head.end()], value["scheme"] or "", REDACTED]
        done = value.end()
    return "".join(out) + text[done:]


def _redact_argv(argv: list[str], withheld: list[str] | None) -> list[str]:
    out: list[str] = []
    value_is_secret = False
    for arg in argv:
        if value_is_secret and not arg.startswith("--"):
            _note(withheld, arg)
            out.append(REDACTED)
            value_is_secret = False
            continue
        value_is_secret = False
        name, eq, value = arg.partition("=")
        if eq and _OVERRIDE_NAME.fullmatch(name):
            if _secret_flag(name):
                _note(withheld, value)
                out.append(f"{name}={REDACTED}")
            else:
                out.append(f"{name}={_redact_text(value, withheld)}")
        elif _OPTION.fullmatch(arg):
            value_is_secret = _secret_flag(arg)
            out.append(arg)
        else:
            out.append(_redact_text(arg, withheld))
    return out


def _note(withheld: list[str] | None, value: str) -> None:
    if withheld is not None and value != REDACTED:
        withheld.append(value)


# ---------------------------------------------------------------------------------------------------------------
# This process's secrets: withheld wherever they appear again


def secrets_of(argv: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The values the rules withhold from a command line and an environment: a secret-named variable's whole
    value, a secret-named flag's value, every credential-shaped part. Those under MIN_KNOWN_CHARS, and the
    system's places (PWD, SSH_AUTH_SOCK ...), are left out: they are no secret to look for in other text."""
    found: list[str] = []
    _redact_argv([str(arg) for arg in argv], found)
    for name, value in (environ or {}).items():
        if name in _PLACES_NOT_SECRETS or name.startswith(_PLACES_PREFIXES):
            continue
        if secret_name(name):
            found.append(value)
        else:
            _redact_text(value, found)
    return frozenset(v for v in found if len(v.strip()) >= MIN_KNOWN_CHARS)


_known: frozenset[str] = frozenset()
_spellings: tuple[str, ...] = ()  # longest first, so that a secret holding another is withheld whole


def learn(argv: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Add the secrets of this command line and environment (``secrets_of``) to this process's: from now on they
    are withheld wherever ddplab writes or shows them. Called once a process knows its own."""
    global _known, _spellings
    _known = _known | secrets_of(argv, environ)
    _spellings = tuple(sorted({s for value in _known for s in _spelled(value)}, key=len, reverse=True))
    return _known


def forget() -> None:
    """No known secrets (tests)."""
    global _known, _spellings
    _known, _spellings = frozenset(), ()


def withhold_known(text: str) -> str:
    """``text`` with every secret this process learned withheld, as typed or as JSON or HTML spell it."""
    for spelling in _spellings:
        if spelling in text:
            text = text.replace(spelling, REDACTED)
    return text


def _spelled(value: str) -> set[str]:
    """The ways a value appears in what ddplab writes: itself, inside a JSON string (either escaping of non-ASCII),
    inside HTML."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
            html.escape(value), html.escape(value, quote=False)}
