"""A hypothesis strategy for random cells: random op graphs with random delays 0..3 in which
every cycle carries a delay (edges to the same or later nodes always have delay >= 1)."""
from hypothesis import strategies as st

from rnngraph.ir import Graph, Init, Node, Param, Ref, State

UNARY = ("sigmoid", "tanh", "neg", "identity", "add_scalar", "mul_scalar")
BINARY = ("add", "sub", "mul")


@st.composite
def random_graphs(draw, max_nodes: int = 7, size: int = 3, max_blocks: int = 1) -> Graph:
    """A validated-by-construction Graph with one float input ``x`` of ``size``: 1..max_blocks
    blocks (like layers) of 1..max_nodes ops each; a block reads the previous block's last node
    (with delay 0) where a single block reads ``x``."""
    nodes = [Node("x", "input", size=size)]
    params: list = []
    source = "x"
    for b in range(draw(st.integers(1, max_blocks))):
        source = _block(draw, nodes, params, source, f"b{b}." if max_blocks > 1 else "", max_nodes, size)
    depth = {}
    for n in nodes:
        for r in n.args:
            if r.delay:
                depth[r.node] = max(depth.get(r.node, 0), r.delay)
    states = tuple(State(f"s_{node}", node, d) for node, d in sorted(depth.items()))
    return Graph("random", tuple(params), tuple(nodes), states, (source,))


def _block(draw, nodes, params, source: str, prefix: str, max_nodes: int, size: int) -> str:
    """Append one random block reading ``source``; returns the name of its last node."""
    n_ops = draw(st.integers(1, max_nodes))
    names = [f"{prefix}n{k}" for k in range(n_ops)]

    def ref(k):  # an argument for op k: an earlier value (any delay) or any op with delay >= 1
        j = draw(st.integers(-1, n_ops - 1))
        if j >= k:
            return Ref(names[j], draw(st.integers(1, 3)))
        if j == -1:
            return Ref(source)
        return Ref(names[j], draw(st.integers(0, 3)))

    for k, name in enumerate(names):
        kind = draw(st.sampled_from(("unary", "binary", "linear", "layer_norm", "param")))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            attrs = (("value", draw(st.floats(-2, 2).map(lambda v: round(v, 3)))),) if "scalar" in op else ()
            nodes.append(Node(name, op, (ref(k),), attrs=attrs, size=size))
        elif kind == "binary":
            nodes.append(Node(name, draw(st.sampled_from(BINARY)), (ref(k), ref(k)), size=size))
        elif kind == "linear":
            params += [Param(f"{name}.weight", (size, size), Init("uniform", 0.6)),
                       Param(f"{name}.bias", (size,), Init("uniform", 0.6))]
            nodes.append(Node(name, "linear", (ref(k),), (f"{name}.weight", f"{name}.bias"), size=size))
        elif kind == "layer_norm":
            params += [Param(f"{name}.g", (size,), Init("uniform", 1.0)), Param(f"{name}.b", (size,), Init("uniform", 1.0))]
            nodes.append(Node(name, "layer_norm", (ref(k),), (f"{name}.g", f"{name}.b"), size=size))
        else:
            params.append(Param(f"{name}.p", (size,), Init("uniform", 1.0)))
            nodes.append(Node(name, "param", (), (f"{name}.p",), size=size))
    return names[-1]
