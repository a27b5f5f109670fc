"""What may appear in a report: a value is withheld when its name or its shape says secret."""

import pytest

from ddplab.redaction import REDACTED, redact


@pytest.mark.parametrize("name", ["DB_PASSWD", "MY_CREDENTIALS", "GLOO_TOKEN", "aws_secret_access_key",
                                  "SESSION_ID", "X_AUTH_HEADER", "COOKIE_JAR", "API_KEY"])
def test_a_secret_name_is_redacted_whatever_its_value(name):
    assert redact(name, "0") == REDACTED


@pytest.mark.parametrize("value", [
    "hf_AbCdEfGhIjKlMnOpQrSt", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "sk-proj-AbCdEfGhIjKlMnOpQr",
    "AKIAIOSFODNN7EXAMPLE", "/tmp/log?token=QUJDREVGR0hJSktMTU5PUFFS", "https://user:hunter22@mirror.example/x",
    "password: correcthorsebattery", "api_key=AbCdEfGhIjKlMnOp", "xoxb-1234567890-abcdefghij",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
])
def test_a_credential_shaped_value_is_redacted_under_any_name(value):
    assert redact("NCCL_DEBUG_FILE", value) == REDACTED


@pytest.mark.parametrize("value", ["INFO", "0,1", "lo", "127.0.0.1", "/tmp/nccl.%h.%p.log", "DETAIL",
                                   "expandable_segments:True", "train-20261130-154610-a1b2c3", "29500",
                                   "/usr/local/cuda", "13.0.2", "2.28.3-1", "compute,utility"])
def test_ordinary_values_are_shown_as_they_are(value):
    assert redact("NCCL_DEBUG", value) == value
