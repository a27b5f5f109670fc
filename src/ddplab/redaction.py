"""Keep secrets out of reports.

Reports travel (they are attached to bug reports), so anything copied from the machine into
them is withheld when its NAME says it is a secret or its VALUE looks like a credential,
whatever list let it through. The patterns are the shapes of well-known token formats and of
``key=value`` pairs carrying a long opaque value (docs/exposure.md).
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# A variable or option whose name contains one of these words holds a secret.
SECRET_NAME_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")

_CREDENTIAL_SHAPES = (
    r"\bhf_[A-Za-z0-9]{8,}",  # Hugging Face access token
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained token
    r"\bsk-[A-Za-z0-9_-]{16,}",  # API secret keys (OpenAI, Anthropic, Stripe ...)
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack token
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JSON Web Token
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@",  # URL with user:password@
    # token=<long opaque blob>, password: ..., api_key=... in a query string or a config line
    r"(?i:token|key|secret|password|passwd|pwd|auth|credential|session|cookie)\w*['\"]?\s*[=:]\s*['\"]?"
    r"[A-Za-z0-9+/_.~-]{12,}",
)
_CREDENTIAL_VALUE = re.compile("|".join(f"(?:{shape})" for shape in _CREDENTIAL_SHAPES))


def secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_NAME_WORDS)


def looks_like_credential(value: str) -> bool:
    return bool(_CREDENTIAL_VALUE.search(value))


def redact(name: str, value: str) -> str:
    """``value`` as it may appear in a report: itself, or REDACTED."""
    return REDACTED if secret_name(name) or looks_like_credential(value) else value
