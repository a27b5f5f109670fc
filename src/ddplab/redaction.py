"""Keep secrets out of reports.

Reports travel (they are attached to bug reports), so anything copied from the machine or the command line into
them is withheld when its NAME says it is a secret or its VALUE looks like a credential, whatever let it
through (docs/exposure.md). One set of rules for everything a report copies:

- environment variables (``redact``): the whole value is withheld;
- command lines (``redact_argv``): the value after a secret-named flag (``--api-key X``, ``--token=X``,
  ``db.password=X`` as Hydra spells overrides) and every credential-shaped value anywhere; the rest is kept,
  so the command line still says what ran;
- free text (``redact_text``): only the credential-shaped parts are withheld.

A name is secret when one of its words (split at ``-``, ``_``, ``.`` and camelCase) is a secret word: token,
secret, password, credentials, cookie ... (also as the end of a word: ``hftoken``, ``clientsecret``), a key of
a known kind (key, apikey, accesskey ...), auth, authorization, pwd, session. Plurals that count rather than
hold (``--max-tokens``), and words that merely begin with one (``--tokenizer``, ``--author``, ``--keyword``),
are not. A name whose last word says the value only points at the secret (``--key-file``, ``--token-path``,
``--secret-name``, ``--token-env``) keeps its value: a path or a name is not the secret, and hiding it would
hide which file the job read; the value is still checked for a credential's shape. The cost of the rule is a
few over-cautious cases (``--sort-key length`` is withheld: the rule cannot tell a dictionary key from a
cryptographic one, and a withheld ordinary value costs less than a leaked key).
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# One word of a name (lower case) that makes it secret.
_SECRET_WORD = re.compile(r"""
      [a-z0-9]*(?:token|secrets?|passwords?|passwd|passphrase|credentials?|cookies?)  # hftoken, clientsecret
    | (?:api|access|secret|private|auth|master|session|signing|encryption|ssh|pass)?key  # not monkey, hotkey
    | (?:api)?auth|authorization|pwd|session(?:id)?
""", re.VERBOSE)
# The last word of a name whose value points at a secret instead of holding it.
_POINTER_WORDS = frozenset({"file", "files", "path", "paths", "dir", "directory", "filename", "name", "env", "var"})
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

# Values that are credentials whatever they are called: the shapes of well-known token formats.
_CREDENTIAL_SHAPES = (
    r"\bhf_[A-Za-z0-9]{8,}",  # Hugging Face access token
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained token
    r"\bsk-[A-Za-z0-9_-]{16,}",  # API secret keys (OpenAI, Anthropic, Stripe ...)
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack token
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?",  # JSON Web Token
)
_CREDENTIAL = re.compile("|".join(f"(?:{shape})" for shape in _CREDENTIAL_SHAPES))
# scheme://user:password@host: the password goes, the user and host stay.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+(?P<at>@)")
# name=value or name: value inside text (a query string, a JSON or config fragment): withheld when the name is
# secret (``secret_name``); an HTTP authorization scheme before the value (``Authorization: Basic X``) is kept.
_NAMED_VALUE = re.compile(r"""(?P<name>[A-Za-z_][\w.-]*)(?P<sep>['"]?\s*[=:]\s*['"]?)"""
                          r"""(?P<scheme>(?i:bearer|basic|token|digest)\s+)?(?P<value>[^\s&'",;}]+)""")
# An argument that is an option name (``--api-key``) or a ``name=value`` override (``--token=X``, ``+db.pwd=X``).
_OPTION = re.compile(r"-{1,2}[A-Za-z_][\w.-]*")
_OVERRIDE_NAME = re.compile(r"[-+~]*[A-Za-z_][\w.-]*")


def secret_name(name: str) -> bool:
    """Does this variable's, option's or key's name say its value is a secret (module docstring)?"""
    words = [w.lower() for w in _WORD_BREAK.split(name) if w]
    if not words or words[-1] in _POINTER_WORDS:
        return False
    return any(_SECRET_WORD.fullmatch(w) for w in words)


def redact(name: str, value: str) -> str:
    """An environment variable's ``value`` as it may appear in a report: itself, or REDACTED."""
    return REDACTED if secret_name(name) or redact_text(value) != value else value


def redact_text(text: str) -> str:
    """``text`` with every credential-shaped part, and every value of a secret-named ``name=value``, withheld."""
    text = _CREDENTIAL.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['at']}", text)
    return _NAMED_VALUE.sub(_named_value, text)


def _named_value(m: re.Match) -> str:
    head = f"{m['name']}{m['sep']}{m['scheme'] or ''}"
    if secret_name(m["name"]):
        return f"{head}{REDACTED}"
    # Not secret itself, but its value may hold a secret-named pair (``url: http://h/?token=X``): read it too.
    return f"{head}{_NAMED_VALUE.sub(_named_value, m['value'])}"


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """A command line as a report may show it: the value after a secret-named flag (``--token X``,
    ``--token=X``, ``db.password=X``) and every credential-shaped value withheld, everything else as typed.

    The argument after a secret-named flag is taken as its value unless it is itself a long option (``--x``):
    a secret may begin with a dash, so ``--use-auth -v`` withholds ``-v`` rather than risk showing a key.
    """
    out: list[str] = []
    value_is_secret = False
    for arg in argv:
        arg = str(arg)
        if value_is_secret and not arg.startswith("--"):
            out.append(REDACTED)
            value_is_secret = False
            continue
        value_is_secret = False
        name, eq, value = arg.partition("=")
        if eq and _OVERRIDE_NAME.fullmatch(name):
            out.append(f"{name}={REDACTED if secret_name(name) else redact_text(value)}")
        elif _OPTION.fullmatch(arg):
            value_is_secret = secret_name(arg)
            out.append(arg)
        else:
            out.append(redact_text(arg))
    return out
