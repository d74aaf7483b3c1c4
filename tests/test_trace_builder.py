"""trace/builder.py's node map: the indexes its provisional names read (explicit names, and each
layer's unnamed nodes by op) stay right in copies and pickles, which re-add the nodes."""
import copy
import pickle

import pytest

from rnngraph.trace.builder import _Nodes, _Pending


def _nodes() -> _Nodes:
    n = _Nodes()
    for vid, (name, op) in enumerate([(None, "tanh"), ("layer0.z", "mul"), (None, "tanh")], 1):
        n[vid] = _Pending(op, [], (), (), 4, "float32", name, "layer0.")
    return n


def test_copies_and_pickles_keep_the_indexes_and_leave_the_original_alone():
    n = _nodes()
    for c in (copy.copy(n), copy.deepcopy(n), pickle.loads(pickle.dumps(n))):
        assert c.named == {"layer0.z": [2]} and c.unnamed == {("layer0.", "tanh"): [1, 3]}
        assert list(c) == [1, 2, 3]
    assert n.named == {"layer0.z": [2]} and n.unnamed == {("layer0.", "tanh"): [1, 3]}


def test_a_node_id_recorded_twice_is_refused():
    n = _nodes()
    with pytest.raises(KeyError, match="node id 2 recorded twice"):
        n[2] = _Pending("add", [], (), (), 4, "float32", None, "layer0.")
