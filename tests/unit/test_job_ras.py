"""`ddplab launch --ras`: whether and where the collective library's RAS service is asked (a pure decision,
made before the job starts), and the conversation with it, bounded at every step (against tests/ras_fake.py)."""

import dataclasses
import socket
import time

import pytest

from ddplab.errors import UsageError
from ddplab.job import ras
from ddplab.platform.vendors import HOST_CPU, NVIDIA, env_whitelisted
from tests.ras_fake import ANSWER, FakeRas

SERVICE = NVIDIA.ras
QUICK = dataclasses.replace(SERVICE, handshake_timeout_s=0.5, answer_within_s=1.5)  # the same service, impatient


def asked(version="2.29.7", environ=None, service=SERVICE):
    return ras.plan(True, service, "NCCL", version, environ or {})


# ------------------------------------------------------------------------------------------ the decision

def test_without_the_flag_there_is_no_plan_at_all():
    assert ras.plan(False, SERVICE, "NCCL", "2.29.7", {}) is None


def test_the_vendor_table_says_where_the_service_listens_and_who_has_none():
    assert (SERVICE.address_env, SERVICE.default_address, SERVICE.since) == ("NCCL_RAS_ADDR", "localhost:28028",
                                                                            (2, 24, 0))
    assert HOST_CPU.ras is None
    assert env_whitelisted("NCCL_RAS_ADDR") and env_whitelisted("NCCL_RAS_ENABLE")  # reports show where it was
    plan = asked()
    assert (plan.host, plan.port, plan.why_not) == ("localhost", 28028, None)


@pytest.mark.parametrize("version, environ, why", [
    ("2.23.4", {}, "NCCL 2.23.4 is older than 2.24.0, the first with NCCL RAS"),
    ("2.29.7", {"NCCL_RAS_ENABLE": "0"}, "switched off for this job: NCCL_RAS_ENABLE=0"),
])
def test_a_service_that_cannot_answer_is_not_asked(version, environ, why):
    plan = asked(version, environ)
    assert plan.why_not == why
    answer = plan.ask()
    assert (answer.status, answer.why, answer.sent, answer.answer) == ("not asked", why, [], "")


def test_a_library_without_a_service_says_so():
    answer = ras.plan(True, None, "Gloo", None, {}).ask()
    assert (answer.service, answer.status, answer.why) == (None, "not asked", "Gloo has no RAS service")


def test_the_address_comes_from_the_jobs_variable():
    assert (asked(environ={"NCCL_RAS_ADDR": "127.0.0.1:12345"}).address) == "127.0.0.1:12345"
    assert (asked(environ={"NCCL_RAS_ADDR": "[::1]:28030"}).host) == "::1"


@pytest.mark.parametrize("value", ["localhost", "localhost:", ":28028", "localhost:port", "localhost:70000"])
def test_a_malformed_address_is_bad_input(value):
    with pytest.raises(UsageError) as err:
        asked(environ={"NCCL_RAS_ADDR": value})
    assert err.value.reference == "invalid-ras-address" and repr(value) in str(err.value)
    assert "NCCL_RAS_ADDR" in str(err.value) and "localhost:28028" in str(err.value)


@pytest.mark.parametrize("version, lines", [
    ("2.28.7", ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]),
    ("2.28.6", ["CLIENT PROTOCOL 2", "VERBOSE STATUS"]),  # JSON only from 2.28.7
    (None, ["CLIENT PROTOCOL 2", "VERBOSE STATUS"]),  # version unknown: text, which every release speaks
])
def test_json_is_asked_for_only_where_the_release_speaks_it(version, lines):
    assert asked(version).lines() == lines


# ------------------------------------------------------------------------------------------ the conversation

def test_the_answer_is_kept_as_the_service_wrote_it():
    with FakeRas("answers") as server:
        answer = asked(environ={"NCCL_RAS_ADDR": server.address}).ask()
    assert (answer.status, answer.why, answer.format) == ("answered", None, "json")
    assert answer.answer == ANSWER and answer.address == server.address
    assert answer.sent == server.lines == ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]
    assert answer.library_version == "2.29.7" and 0 <= answer.seconds < 2


def test_a_service_that_refuses_json_answers_in_text():
    with FakeRas("textonly", answer="Job summary\n") as server:
        answer = asked(environ={"NCCL_RAS_ADDR": server.address}).ask()
    assert (answer.status, answer.format, answer.answer) == ("answered", "text", "Job summary\n")
    assert server.lines == ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]


def test_a_silent_service_costs_the_handshake_timeout_and_no_more():
    with FakeRas("silent") as server:
        start = time.monotonic()
        answer = asked(environ={"NCCL_RAS_ADDR": server.address}, service=QUICK).ask()
        took = time.monotonic() - start
    assert (answer.status, answer.answer, answer.sent) == ("no answer", "", ["CLIENT PROTOCOL 2"])
    assert "nothing within 0.5 s after 'CLIENT PROTOCOL 2'" == answer.why
    assert 0.4 <= took < 1.5


def test_an_answer_that_never_ends_is_cut_off_at_the_deadline():
    with FakeRas("endless") as server:
        start = time.monotonic()
        answer = asked(environ={"NCCL_RAS_ADDR": server.address}, service=QUICK).ask()
        took = time.monotonic() - start
    assert answer.status == "cut off" and answer.answer.startswith("Rank 0 -- still collecting")
    assert 1.4 <= took < 2.5


def test_nobody_listening_is_unreachable_at_once():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free once closed
    answer = asked(environ={"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}).ask()
    assert answer.status == "unreachable" and "connecting" in answer.why and answer.sent == []


def test_a_service_speaking_another_protocol_is_left_at_its_first_line():
    with FakeRas("stranger") as server:
        answer = asked(environ={"NCCL_RAS_ADDR": server.address}).ask()
    assert (answer.status, answer.answer, server.lines) == ("unexpected answer", "HTTP/1.1 400 Bad Request",
                                                            ["CLIENT PROTOCOL 2"])


def test_the_watcher_waits_for_the_longest_conversation_and_no_longer():
    assert asked().budget_s == max(SERVICE.answer_within_s, 3 * SERVICE.handshake_timeout_s)
    assert asked("2.20.0").budget_s == 0.0
