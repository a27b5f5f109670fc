"""The layers hold (issue 19): scripts/import_graph.py finds no circle and no import from a lower layer up to a
higher one in src/ddplab, counting imports inside functions and modules a registry names."""

from pathlib import Path

import pytest

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_graph.py"


@pytest.fixture(scope="module")
def graph_script():
    return load_script("import_graph")


@pytest.fixture(scope="module")
def edges(graph_script):
    return graph_script.graph()


def test_every_module_has_a_layer(graph_script, edges):
    assert len(edges) > 150  # the walk found the package
    names = [name for _, layer in graph_script.LAYERS for name in layer]
    assert len(names) == len(set(names)), "a name in two layers"
    for module in edges:
        graph_script.layer_of(module)  # KeyError names a module the table lacks


def test_no_circles_and_no_upward_imports(graph_script, edges):
    kept = graph_script.without_owed(edges)
    assert graph_script.circles(kept) == []
    assert graph_script.upward(kept) == []


def test_every_owed_import_is_still_there(graph_script, edges):
    """An owed import that is gone must be struck from OWED, so the table never excuses a new one."""
    assert [edge for edge in graph_script.OWED if edge[1] not in edges.get(edge[0], ())] == []


def test_the_graph_sees_imports_inside_functions_and_registries(graph_script, edges):
    assert "ddplab.measurements.sweep" in edges["ddplab.measurements"]  # a registry's string
    assert "ddplab.reaping" in edges["ddplab.lab"]  # an import inside a function (leftover_check)


def test_a_circle_and_an_upward_import_are_found(graph_script):
    toy = {"ddplab.records.core": {"ddplab.lab"}, "ddplab.lab": {"ddplab.records.core"}, "ddplab.errors": set()}
    assert graph_script.circles(toy) == [["ddplab.lab", "ddplab.records.core"]]
    assert graph_script.upward(toy) == [("ddplab.records.core", "ddplab.lab")]
