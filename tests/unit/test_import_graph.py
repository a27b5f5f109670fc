"""The folders are the layers: scripts/import_graph.py finds no circle and no import from a lower layer up to a
higher one in src/ddplab, counting imports inside functions and modules a registry names; the layers are named by
room (a folder or a top-level module), and there are few rooms and fewer top-level modules."""

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
    all_rooms, top = graph_script.rooms()
    assert set(names) == all_rooms, "the table names exactly the rooms there are"
    for module in edges:
        graph_script.layer_of(module)  # KeyError names a module the table lacks


def test_no_circles_and_no_upward_imports(graph_script, edges):
    kept = graph_script.without_owed(edges)
    assert graph_script.circles(kept) == []
    assert graph_script.upward(kept) == []


def test_every_owed_import_is_still_there(graph_script, edges):
    """An owed import that is gone must be struck from OWED, so the table never excuses a new one."""
    assert [edge for edge in graph_script.OWED if edge[1] not in edges.get(edge[0], ())] == []


def test_few_rooms_and_fewer_top_level_modules(graph_script):
    all_rooms, top = graph_script.rooms()
    assert len(all_rooms) <= graph_script.MOST_ROOMS == 25, sorted(all_rooms)
    assert len(top) <= graph_script.MOST_TOP_LEVEL_MODULES == 5, sorted(top)
    assert {"cli", "errors", "__main__", "__init__"} <= top


def test_the_graph_sees_imports_inside_functions_and_registries(graph_script, edges):
    assert "ddplab.measurements.sweep" in edges["ddplab.measurements"]  # a registry's string
    assert "ddplab.supervision.reaping" in edges["ddplab.lab.run"]  # an import inside a function (leftover_check)


def test_a_circle_and_an_upward_import_are_found(graph_script):
    toy = {"ddplab.records.core": {"ddplab.lab.run"}, "ddplab.lab.run": {"ddplab.records.core"},
           "ddplab.errors": set()}
    assert graph_script.circles(toy) == [["ddplab.lab.run", "ddplab.records.core"]]
    assert graph_script.upward(toy) == [("ddplab.records.core", "ddplab.lab.run")]
    assert graph_script.upward({"ddplab.errors": {"ddplab.cli"}, "ddplab.cli": set()}) == [("ddplab.errors", "ddplab.cli")]


def test_no_two_classes_share_a_name():
    """One name, one thing: a reader who meets a class name knows which it is without its import line."""
    import ast
    from collections import defaultdict

    where = defaultdict(list)
    for path in sorted((SCRIPT.parents[1] / "src" / "ddplab").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(path.name)
    assert {name: files for name, files in where.items() if len(files) > 1} == {}
