"""Reports aggregated across machines, for real: one launcher per network namespace, gloo, and every machine's
report carrying every rank of the job with its machine; storm and sweep repeated inside and between
machines; machine pairs tested and named (docs/metrics.md, "Across machines"). The 2 x 2 train's report
is checked the same way in test_multinode_netns.py, beside the rest of that run.

Each launcher only gets its own ranks back from elastic; before this, machine b's report knew nothing of
ranks 0 and 1, and nothing was measured inside or between machines.
"""

import subprocess
import sys

import pytest

from tests.conftest import load_json
from tests.netns import machines  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

PORT = 29400  # each test's machines are fresh namespaces: every port is free in them
STORM = ["storm", "--nproc", "2", "--iters", "40"]
SWEEP = ["sweep", "--nproc", "2", "-b", "8", "-e", "8K", "-f", "1024", "-n", "3", "-w", "1"]


def _run_on(group, tmp_path, argv: list[str]) -> tuple[dict[str, dict], list[str]]:
    """``argv`` on every machine of ``group`` (one launcher each, the first hosting the store); each report
    and each launcher's terminal output."""
    names = "abcdefgh"[:len(group)]
    endpoint = f"{group[0].address}:{PORT}"
    launchers = [m.popen([sys.executable, "-m", "ddplab", *argv, "--nnodes", str(len(group)), "--rdzv-endpoint",
                          endpoint, "--run-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for m, name in zip(group, names)]
    outputs = [p.communicate(timeout=240)[0] for p in launchers]
    codes = [p.returncode for p in launchers]
    assert all(code in (0, 1) for code in codes), "\n".join(o[-3000:] for o in outputs)  # a verdict, not a crash
    docs = {name: load_json(tmp_path / f"{name}.json") for name in names}
    for name, doc in docs.items():
        assert doc["results"]["completed"], (name, outputs[names.index(name)][-3000:])
    assert all(m.left_running() == [] for m in group)  # nothing left running on any machine
    return docs, outputs


def _every_rank_with_its_machine(doc: dict, a, b) -> None:
    m = doc["results"]["machines"]
    assert [(p["rank"], p["local_rank"], p["machine"]) for p in m["ranks"]] == [
        (0, 0, a.address), (1, 1, a.address), (2, 0, b.address), (3, 1, b.address)]
    assert m["machines"] == {a.address: [0, 1], b.address: [2, 3]}


def _groups(rows: list[dict]) -> list[tuple]:
    return list(dict.fromkeys((r["scope"], tuple(r["machines"]), tuple(r["ranks"])) for r in rows))


def test_storm_on_two_machines_measures_inside_and_between_them_the_same_on_both(machines, tmp_path):
    a, b = machines(2)
    docs, outputs = _run_on([a, b], tmp_path, STORM)
    for doc in docs.values():
        _every_rank_with_its_machine(doc, a, b)
    latency = [doc["results"]["machines"]["latency"] for doc in docs.values()]
    assert latency[0] == latency[1]  # gathered by the ranks: both machines report the same rows
    assert _groups(latency[0]) == [("whole job", (a.address, b.address), (0, 1, 2, 3)),
                                   ("intra-machine", (a.address,), (0, 1)),
                                   ("intra-machine", (b.address,), (2, 3)),
                                   ("inter-machine", (a.address, b.address), (0, 2))]
    for row in latency[0]:
        assert row["bytes"] == 4 and 0 < row["mean_us"] <= row["mean_us_max_rank"] < 1e6, row
    assert "Every rank of the job: 4 on 2 machine(s)" in outputs[1]
    assert "Latency inside and between machines" in outputs[1] and f"intra-machine {a.address}" in outputs[1]


def test_sweep_on_two_machines_gives_busbw_inside_and_between_them_checked_on_both(machines, tmp_path):
    a, b = machines(2)
    docs, outputs = _run_on([a, b], tmp_path, SWEEP)
    rows = [doc["results"]["machines"]["rows"] for doc in docs.values()]
    assert rows[0] == rows[1]
    assert _groups(rows[0]) == [("whole job", (a.address, b.address), (0, 1, 2, 3)),
                                ("intra-machine", (a.address,), (0, 1)),
                                ("intra-machine", (b.address,), (2, 3)),
                                ("inter-machine", (a.address, b.address), (0, 2))]
    for row in rows[0]:
        n = len(row["ranks"])
        assert row["op"] == "all_reduce" and row["size_bytes"] in (8, 8192) and row["num_wrong"] == 0, row
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (n - 1) / n), row  # the group's own n
    assert len(rows[0]) == 4 * 2  # every group, every size
    for doc in docs.values():
        _every_rank_with_its_machine(doc, a, b)
    assert "all_reduce busbw inside and between machines" in outputs[0]


def test_pairwise_on_three_machines_tests_and_names_every_pair(machines, tmp_path):
    group = machines(3)
    docs, outputs = _run_on(list(group), tmp_path, ["pairwise", "-b", "8", "-e", "32K", "-f", "4096", "-n", "3",
                                                    "-w", "1", "-R", "1"])
    addresses = [m.address for m in group]
    expected = {f"{x} <-> {y}" for i, x in enumerate(addresses) for y in addresses[i + 1:]}
    pairs = [doc["results"]["pairs"] for doc in docs.values()]
    assert pairs[0] == pairs[1] == pairs[2]
    assert {f"{p['machine_a']} <-> {p['machine_b']}" for p in pairs[0]} == expected
    assert sorted(p["round"] for p in pairs[0]) == [0, 1, 2]  # three machines: one pair per round
    for p in pairs[0]:
        assert (p["latency_size_bytes"], p["busbw_size_bytes"]) == (8, 32768), p
        assert p["latency_us"] > 0 and p["busbw_gbps"] > 0 and p.get("num_wrong") == 0, p
    for name, doc in docs.items():
        finding = doc["results"]["finding"]
        assert finding["slowest"] in expected and finding["broken"] == [] and finding["rule"].startswith(
            "a pair is slow when"), name
        assert doc["verdict"] == "pass", name  # slowness is informational on the host CPU; nothing broke
        assert [p["rank"] for p in doc["results"]["machines"]["ranks"]] == [0, 1, 2]
    assert "Machine pairs (one rank on each)" in outputs[2] and "rule: a pair is slow when" in outputs[2]
    # each rank's own entry names the pairs it tested: rank 0 of machine a tested a's two pairs
    assert sorted(docs["a"]["results"]["ranks"][0]["pairs"]) == sorted(e for e in expected if addresses[0] in e)
