"""What may appear in a report: a value is withheld when its name or its shape says secret."""

import pytest

from ddplab.basics.redaction import REDACTED, redact


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


# -- command lines: what a user's script was given (`ddplab launch -- train.py ...`, left_running[].cmdline) --

from ddplab.basics.redaction import redact_argv, redact_text, secret_name  # noqa: E402

# Fake values with the shapes of real credentials (none of them is one).
CREDENTIAL_SHAPES = {
    "hugging face": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "openai project key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_yz-0123",
    "anthropic key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github classic": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github oauth": "gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github fine-grained": "github_pat_11ABCDEFG0123456789_AbCdEfGhIjKlMnOpQrStUvWxYz",
    "slack bot": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack user": "xoxp-123456789012-1234567890123-AbCdEfGhIj",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "aws session key id": "ASIAY34FZKBOKMUTVV7A",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}


@pytest.mark.parametrize("shape", sorted(CREDENTIAL_SHAPES))
def test_a_credential_shaped_argument_is_withheld_wherever_it_stands(shape):
    secret = CREDENTIAL_SHAPES[shape]
    for argv in (["train.py", secret], ["train.py", "--model", secret], ["train.py", f"--model={secret}"],
                 ["train.py", f"--header=Authorization: Bearer {secret}"], ["train.py", f"x.y={secret}"]):
        shown = redact_argv(argv)
        assert secret not in " ".join(shown) and "[redacted]" in " ".join(shown), (argv, shown)
        assert shown[0] == "train.py"


@pytest.mark.parametrize("flag", ["--api-key", "--api_key", "--apiKey", "--API-KEY", "--token", "--hf-token",
                                  "--hf_token", "--HF_TOKEN", "--auth-token", "--access-token", "--secret",
                                  "--client-secret", "--password", "--db-password", "--passwd", "--pwd", "--auth",
                                  "--credentials", "--aws-secret-access-key", "--private-key", "--wandb-api-key",
                                  "-password", "--passphrase", "--cookie", "--authorization"])
def test_the_value_of_a_secret_named_flag_is_withheld_in_both_spellings(flag):
    value = "short"  # a secret need not have a credential's shape
    assert redact_argv(["train.py", flag, value, "--epochs", "3"]) == \
        ["train.py", flag, "[redacted]", "--epochs", "3"]
    assert redact_argv(["train.py", f"{flag}={value}", "--epochs=3"]) == ["train.py", f"{flag}=[redacted]", "--epochs=3"]


def test_hydra_overrides_are_flags_too():
    assert redact_argv(["train.py", "db.password=hunter2", "+wandb.api_key=abc", "trainer.max_steps=10"]) == \
        ["train.py", "db.password=[redacted]", "+wandb.api_key=[redacted]", "trainer.max_steps=10"]


def test_a_secret_flag_without_a_value_takes_nothing_from_the_next_option():
    assert redact_argv(["--use-auth", "--epochs", "3"]) == ["--use-auth", "--epochs", "3"]
    assert redact_argv(["--token"]) == ["--token"]
    # A value may begin with a dash: the next argument is withheld unless it is a long option.
    assert redact_argv(["--password", "-x9!"]) == ["--password", "[redacted]"]


def test_a_url_keeps_its_host_and_user_but_not_its_password():
    assert redact_argv(["--db", "postgres://alice:s3cr3t@db.example:5432/runs"]) == \
        ["--db", "postgres://alice:[redacted]@db.example:5432/runs"]
    assert redact_text("see https://mirror.example/x?token=abc&page=2") == \
        "see https://mirror.example/x?token=[redacted]&page=2"
    assert redact_text("url: https://mirror.example/x?api_key=abc") == "url: https://mirror.example/x?api_key=[redacted]"


def test_an_authorization_header_keeps_its_scheme_only():
    assert redact_argv(["-H", "Authorization: Basic dXNlcjpwYXNzd29yZA=="]) == ["-H", "Authorization: Basic [redacted]"]
    assert redact_text('{"Authorization": "Bearer abc.def"}') == '{"Authorization": "Bearer [redacted]"}'


# Plain words and paths: shown as typed. `--key-file`, `--token-path`, `--secret-name`, `--token-env` name where
# the secret is, not the secret (basics/redaction.py's docstring): their values stay, unless they have a credential's
# shape themselves.
PLAIN = ["train.py", "--tokenizer", "gpt2", "--max-tokens", "4096", "--num_tokens=128", "--author", "alice",
         "--keyword", "loss", "--key-file", "/etc/ssl/private/job.pem", "--token-path", "/run/secrets/hf",
         "--secret-name", "prod-db", "--token-env", "HF_TOKEN", "--data", "/data/tokens/train.bin",
         "--lr", "3e-4", "--output_dir=/scratch/run-20261130", "model.tokenizer=meta-llama/Llama-2-7b-hf",
         "--monkey", "3", "--config", "expandable_segments:True", "--run-id", "train-20261130-154610-a1b2c3",
         "https://huggingface.co/datasets/c4", "sk-short", "hf_x", "--", "-v"]


def test_plain_words_and_paths_are_shown_as_typed():
    assert redact_argv(PLAIN) == PLAIN


@pytest.mark.parametrize("name,secret", [("--key", True), ("API_KEY", True), ("hfToken", True), ("SESSION_ID", True),
                                         ("--tokenizer", False), ("--key-file", False), ("HF_TOKEN_PATH", False),
                                         ("--max-tokens", False), ("--sort_keys", False)])
def test_secret_name_reads_words(name, secret):
    assert secret_name(name) is secret


def test_redaction_is_idempotent_and_keeps_the_length():
    argv = ["train.py", "--api-key", "X", "--token=Y", CREDENTIAL_SHAPES["hugging face"], "--epochs", "3"]
    once = redact_argv(argv)
    assert redact_argv(once) == once and len(once) == len(argv)


@pytest.mark.parametrize("argv", [["-p", "hunter22"], ["--pass", "hunter22"], ["--db-pass=hunter22"], ["--pw", "hunter22"],
                                  ["-p=hunter22"]])
def test_p_pass_and_pw_are_password_flags(argv):
    shown = redact_argv(["mysql", *argv])
    assert "hunter22" not in " ".join(shown) and "[redacted]" in " ".join(shown), shown
    assert redact_argv(["train.py", "--passes", "3", "--bypass", "cache"]) == \
        ["train.py", "--passes", "3", "--bypass", "cache"]


# -- this process's secrets: withheld wherever they appear again --

from ddplab.basics import redaction  # noqa: E402
from ddplab.basics.files import withhold_in_place, write_text_atomic  # noqa: E402


def test_a_learned_secret_is_withheld_wherever_it_appears_in_any_spelling():
    odd = 'pa"ss\\wörd-0011'  # characters JSON and HTML spell otherwise
    learned = redaction.learn(["train.py", "--api-key", "plainsecret-1111", "-p", odd, "--model", "gpt2"],
                              {"MY_SERVICE_TOKEN": "envsecret-9999", "HOME": "/root"})
    assert learned == {"plainsecret-1111", odd, "envsecret-9999"}
    text = f"login failed: key plainsecret-1111, token envsecret-9999 ({odd})"
    assert redaction.redact_text(text) == "login failed: key [redacted], token [redacted] ([redacted])"
    assert redact_argv(["--model", "envsecret-9999"]) == ["--model", "[redacted]"]  # under any flag
    import html
    import json
    for spelled in (json.dumps({"m": text}), json.dumps({"m": text}, ensure_ascii=False), html.escape(text)):
        kept = redaction.withhold_known(spelled)
        assert "secret" not in kept and "w\\u00f6rd" not in kept and "wörd" not in kept, kept


def test_short_values_and_the_systems_places_are_not_looked_for_elsewhere():
    learned = redaction.learn(["--auth-type", "basic"], {"PWD": "/home/alice/work", "XDG_SESSION_TYPE": "wayland-x",
                                                         "SSH_AUTH_SOCK": "/run/user/1000/ssh-agent", "SESSION": "tty"})
    assert learned == set()
    assert redaction.withhold_known("/home/alice/work/basic/tty") == "/home/alice/work/basic/tty"


def test_every_file_ddplab_writes_withholds_the_learned_secrets(tmp_path):
    redaction.learn(["--token", "plainsecret-1111"])
    path = write_text_atomic(tmp_path / "job.json", '{"target": ["train.py", "plainsecret-1111"]}')
    assert path.read_text() == '{"target": ["train.py", "[redacted]"]}'


def test_a_log_is_rewritten_in_place_only_where_it_holds_a_secret(tmp_path):
    log, other = tmp_path / "stdout.log", tmp_path / "other.log"
    log.write_bytes(b"step 1\r\nkey plainsecret-1111 \xff\nstep 2")
    other.write_text("nothing to hide\n")
    redaction.learn(["--token", "plainsecret-1111"])
    assert withhold_in_place(log) and not withhold_in_place(other) and not withhold_in_place(tmp_path / "absent.log")
    assert log.read_bytes() == b"step 1\r\nkey [redacted] \xff\nstep 2"  # every other byte as it was
    assert other.read_text() == "nothing to hide\n"


def test_a_rank_withholds_its_secrets_from_its_error_and_status(tmp_path):
    from ddplab.basics.rundir import RunDir
    from ddplab.supervision.rank import RankLife

    run = RunDir(tmp_path, "launch-test")
    life = RankLife(run, environ={"RANK": "0", "MY_SERVICE_TOKEN": "envsecret-9999"})
    life.run.rank_dir(0).mkdir(parents=True)
    try:
        raise RuntimeError(f"login failed with envsecret-9999 and {CREDENTIAL_SHAPES['hugging face']}")
    except RuntimeError as exc:
        life.record_error(exc, "Traceback ...\nRuntimeError: login failed with envsecret-9999\n", 1)
    error = (tmp_path / "ranks" / "0" / "error.json").read_text()
    assert "login failed with [redacted] and [redacted]" in error and "envsecret-9999" not in error, error


def test_a_json_record_is_redacted_in_every_string():
    assert redaction.redact_json({"message": {"message": "token=abc", "extraInfo": {"n": 3, "l": ["hf_AbCdEfGhIjKl"]}}}) \
        == {"message": {"message": "token=[redacted]", "extraInfo": {"n": 3, "l": ["[redacted]"]}}}


# Inputs that made the old patterns start again inside a word they had read (quadratic: 3.3 s for 8,000
# characters) or recurse once per pair (a RecursionError for "x=x=...").
ADVERSARIAL = ["a", "a1", "éa", "a-", "a:", "a://", "a://b:", "\"=", "eyJ-", "x=", "token=", "a=b:", " "]


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_redaction_is_linear_in_its_input(unit):
    import time

    def cost(n: int) -> float:
        text = (unit * n)[:n]
        best = float("inf")
        for _ in range(5):  # this process's CPU time, the least of five: the machine is shared
            started = time.process_time()
            redact_argv(["--flag", text, f"--x={text}"])
            redaction.secrets_of([text], {"X": text})
            best = min(best, time.process_time() - started)
        return best

    small, large = cost(2_000), cost(16_000)
    assert large < 20 * small + 0.02, (unit, small, large)  # 8 times the input: about 8 times the time, never 64


def test_a_script_argument_of_120000_characters_takes_a_moment():
    import time

    started = time.perf_counter()
    redact_argv(["train.py", "a" * 120_000])  # it hung a launch: about 280 s a call before
    assert time.perf_counter() - started < 2.0


def test_an_exception_named_after_a_secret_word_keeps_its_message():
    # KeyError splits into "key" and "error": the missing key it names is what a traceback is read for
    assert redact_text("KeyError: 'placement'") == "KeyError: 'placement'"
    assert redact_text("TokenError: bad input") == "TokenError: bad input"
    assert secret_name("KeyError") is False and secret_name("ApiKey") is True
