"""trace/builder.py's node map: the indexes its provisional names read (explicit names, and each
layer's unnamed nodes by op) stay right in copies and pickles, which re-add the nodes."""
import copy
import pickle

import pytest

import rnngraph as rg
from rnngraph.trace import Builder, tracing


def _builder() -> Builder:
    """Nodes 1-4: the input x, tanh(x), an explicitly named mul, tanh again (layer ``layer0.``)."""
    b = Builder("net")
    b.prefix = "layer0."
    with tracing(b):
        x = b.add("input", size=4, name="x")
        a = rg.tanh(x)
        b.add("mul", (a, a), name="layer0.z")
        rg.tanh(a)
    return b


def test_copies_and_pickles_keep_the_indexes_and_leave_the_original_alone():
    nodes = _builder().nodes
    want = ({"x": [1], "layer0.z": [3]}, {("layer0.", "tanh"): [2, 4]})
    for c in (copy.copy(nodes), copy.deepcopy(nodes), pickle.loads(pickle.dumps(nodes))):
        assert (c.named, c.unnamed) == want and list(c) == [1, 2, 3, 4]
    assert (nodes.named, nodes.unnamed) == want


def test_a_node_id_recorded_twice_is_refused():
    nodes = _builder().nodes
    with pytest.raises(KeyError, match="node id 2 recorded twice"):
        nodes[2] = nodes[4]
