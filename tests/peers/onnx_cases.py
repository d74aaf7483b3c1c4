"""Load the ONNX backend node tests for LSTM / GRU / RNN as plain NumPy cases.

The ``onnx`` wheel ships reference cases under ``onnx/backend/test/data/node/<name>/``
(``model.onnx`` plus ``test_data_set_0/{input,output}_*.pb``).  This module finds the
ones whose single node is an ``LSTM``, ``GRU`` or ``RNN`` operator and converts them to
PyTorch's single-layer, single-direction conventions, so a cell implementation can be
checked against them.  It does not import ``rnngraph``.

Notation: T = sequence length, S = batch size, I = input size, H = hidden size,
D = num_directions.  ONNX layout 0: X (T, S, I), Y (T, D, S, H), Y_h/Y_c (D, S, H);
layout 1: X (S, T, I), Y (S, T, D, H), Y_h/Y_c (S, D, H), initial_h/c (S, D, H).
Spec: https://onnx.ai/onnx/operators/onnx__LSTM.html (and ``onnx__GRU``, ``onnx__RNN``).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # pragma: no cover - the loader then reports no cases
    onnx = None

OPS = ("LSTM", "GRU", "RNN")
#: ONNX input / output names by position, per operator.
INPUT_NAMES = {
    "LSTM": ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
    "GRU": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
    "RNN": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
}
OUTPUT_NAMES = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}
#: Default activations for ONE direction (ONNX spec); bidirectional repeats them.
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
#: Gate blocks as stored by ONNX, and the row-permutation to PyTorch's order.
ONNX_GATES = {"LSTM": "iofc", "GRU": "zrh", "RNN": "i"}
TORCH_GATES = {"LSTM": "ifco", "GRU": "rzh", "RNN": "i"}  # torch i,f,g,o / r,z,n / (single)


def data_dir() -> str | None:
    """The onnx node-test data directory, or None if onnx or its data is missing."""
    if onnx is None:
        return None
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    return d if os.path.isdir(d) else None


@functools.lru_cache(maxsize=None)
def _all_cases() -> dict[str, str]:
    """Map case name -> op for every node test made of a single LSTM/GRU/RNN node."""
    d, found = data_dir(), {}
    if d is None:
        return found
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name, "model.onnx")
        if not os.path.isfile(path):
            continue
        nodes = onnx.load(path, load_external_data=False).graph.node
        if len(nodes) == 1 and nodes[0].op_type in OPS:
            found[name] = nodes[0].op_type
    return found


def onnx_rnn_cases(op: str) -> list[str]:
    """Sorted case names whose node is ``op`` ('LSTM', 'GRU' or 'RNN'); [] without onnx data."""
    return [n for n, o in _all_cases().items() if o == op.upper()]


@dataclass
class OnnxCase:
    """One ONNX reference case, in ONNX's own shapes (see module docstring).

    ``inputs``/``outputs`` hold only what the node uses and the test set provides, keyed by
    ONNX name (X, W, R, B, sequence_lens, initial_h, initial_c, P / Y, Y_h, Y_c).
    W: (D, G*H, I), R: (D, G*H, H), B: (D, 2*G*H), P: (D, 3*H), with G gates (4, 3, 1).
    """

    name: str
    op: str
    attrs: dict
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def unsupported_reason(self) -> str | None:
        """Why :func:`to_torch_layout` cannot express this case, or None if it can."""
        a, why = self.attrs, []
        if a["direction"] != "forward":
            why.append(f"direction={a['direction']}")
        if a["activations"] != DEFAULT_ACTIVATIONS[self.op]:
            why.append(f"activations={a['activations']}")
        if a["clip"] is not None:
            why.append(f"clip={a['clip']}")
        if a.get("input_forget", 0):
            why.append("input_forget=1")
        if "sequence_lens" in self.inputs:
            T = self.inputs["X"].shape[1 if a["layout"] else 0]
            if np.any(self.inputs["sequence_lens"] != T):
                why.append(f"sequence_lens={self.inputs['sequence_lens'].tolist()} != T={T}")
        return "; ".join(why) or None

    @property
    def supported(self) -> bool:
        return self.unsupported_reason is None


def _attrs(op: str, node) -> dict:
    """Node attributes with the ONNX-spec defaults filled in."""
    a = {k.name: helper.get_attribute_value(k) for k in node.attribute}
    a = {k: v.decode() if isinstance(v, bytes) else v for k, v in a.items()}
    if "activations" in a:
        a["activations"] = [s.decode() if isinstance(s, bytes) else s for s in a["activations"]]
    a.setdefault("direction", "forward")
    D = 2 if a["direction"] == "bidirectional" else 1
    a.setdefault("activations", DEFAULT_ACTIVATIONS[op] * D)
    a.setdefault("activation_alpha", None)
    a.setdefault("activation_beta", None)
    a.setdefault("clip", None)
    a.setdefault("layout", 0)
    a.setdefault("hidden_size", None)  # required in practice; inferred from R if absent
    if op == "LSTM":
        a.setdefault("input_forget", 0)
    if op == "GRU":
        a.setdefault("linear_before_reset", 0)
    return a


def load_case(name: str) -> OnnxCase:
    """Read ``model.onnx`` and ``test_data_set_0`` of case ``name`` into an :class:`OnnxCase`."""
    root = os.path.join(data_dir() or "", name)
    graph = onnx.load(os.path.join(root, "model.onnx")).graph
    (node,) = graph.node
    op = node.op_type
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    feeds = [i.name for i in graph.input if i.name not in inits]
    sets = os.path.join(root, "test_data_set_0")

    def read(kind: str, names: list[str]) -> dict[str, np.ndarray]:
        return {n: numpy_helper.to_array(onnx.load_tensor(os.path.join(sets, f"{kind}_{k}.pb")))
                for k, n in enumerate(names) if os.path.isfile(os.path.join(sets, f"{kind}_{k}.pb"))}

    values = {**inits, **read("input", feeds)}
    graph_out = read("output", [o.name for o in graph.output])
    inputs = {onnx_name: values[v] for onnx_name, v in zip(INPUT_NAMES[op], node.input) if v}
    outputs = {onnx_name: graph_out[v] for onnx_name, v in zip(OUTPUT_NAMES[op], node.output)
               if v and v in graph_out}
    attrs = _attrs(op, node)
    if attrs["hidden_size"] is None:
        attrs["hidden_size"] = inputs["R"].shape[-1]
    return OnnxCase(name, op, attrs, inputs, outputs)


def synthetic_case(op: str, *, seed: int = 0, T: int = 3, S: int = 2, I: int = 4, H: int = 5,
                   layout: int = 0, linear_before_reset: int = 0) -> OnnxCase:
    """A random-weight case (all optional inputs but sequence_lens) computed by ``onnx.reference``.

    Needed because the shipped LSTM cases use constant W, R, P (every gate identical), so
    they cannot reveal a wrong gate or peephole order.  The reference evaluator is run in
    layout 0 (its layout-1 path mislabels Y_h, and it never returns Y_c); for ``layout=1``
    the arrays are then transposed per the spec.  Outputs: Y and Y_h only.
    """
    G, rng = len(ONNX_GATES[op]), np.random.default_rng(seed)
    slots = INPUT_NAMES[op][:4] + ("",) + INPUT_NAMES[op][5:]  # no sequence_lens: the reference
    names = [n for n in slots if n]                            # evaluator mishandles it
    shapes = dict(X=(T, S, I), W=(1, G * H, I), R=(1, G * H, H), B=(1, 2 * G * H), initial_h=(1, S, H),
                  initial_c=(1, S, H), P=(1, 3 * H))
    inputs = {n: rng.uniform(-1, 1, shapes[n]).astype(np.float32) for n in names}
    attrs = dict(hidden_size=H) | ({"linear_before_reset": linear_before_reset} if op == "GRU" else {})
    node = helper.make_node(op, list(slots), ["Y", "Y_h"], **attrs)
    io = lambda n, a: helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
    model = helper.make_model(helper.make_graph(
        [node], op, [io(n, inputs[n]) for n in names],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")]))
    from onnx.reference import ReferenceEvaluator
    Y, Y_h = ReferenceEvaluator(model).run(None, inputs)
    outputs = {"Y": Y, "Y_h": Y_h}
    if layout == 1:  # X (S, T, I); initial_h/c, Y_h (S, 1, H); Y (S, T, 1, H)
        inputs["X"], outputs["Y"] = inputs["X"].transpose(1, 0, 2), Y.transpose(2, 0, 1, 3)
        for d, k in ((inputs, "initial_h"), (inputs, "initial_c"), (outputs, "Y_h")):
            if k in d:
                d[k] = d[k].transpose(1, 0, 2)
    node = helper.make_node(op, list(slots), ["Y", "Y_h"], layout=layout, **attrs)
    return OnnxCase(f"synthetic_{op.lower()}_seed{seed}_layout{layout}"
                    + (f"_lbr{linear_before_reset}" if op == "GRU" else ""), op, _attrs(op, node), inputs, outputs)


def _reorder(m: np.ndarray, op: str, H: int) -> np.ndarray:
    """Permute gate blocks (rows of size H along axis 0) from ONNX to PyTorch order."""
    blocks = dict(zip(ONNX_GATES[op], np.split(m, len(ONNX_GATES[op]), axis=0)))
    assert all(b.shape[0] == H for b in blocks.values())
    return np.concatenate([blocks[g] for g in TORCH_GATES[op]], axis=0)


def to_torch_layout(case: OnnxCase) -> dict:
    """Convert ``case`` to PyTorch's single-layer, single-direction, seq-first conventions.

    Always returns ``name``, ``op``, ``supported`` (bool) and ``reason`` (str or None).
    For unsupported cases nothing else is returned.  Otherwise (G = 4 LSTM, 3 GRU, 1 RNN):

    - ``x`` (T, S, I); ``weight_ih`` (G*H, I); ``weight_hh`` (G*H, H); ``bias_ih``,
      ``bias_hh`` (G*H,) — zeros when B is absent. Gate order: LSTM i, f, g, o;
      GRU r, z, n; RNN the single block.
    - ``h0`` (S, H) and, for LSTM, ``c0`` (S, H) — zeros when absent.
    - LSTM: ``p_i``, ``p_o``, ``p_f`` (H,) peepholes (zeros when P absent), ``has_peepholes``.
    - GRU: ``linear_before_reset`` (int; 1 means torch's n = tanh(W_in x + b_in + r*(W_hn h + b_hn))).
    - Expected outputs, only those the case provides: ``y`` (T, S, H), ``h_T`` (S, H),
      ``c_T`` (S, H).
    """
    reason = case.unsupported_reason
    out = {"name": case.name, "op": case.op, "supported": reason is None, "reason": reason}
    if reason is not None:
        return out
    op, a, inp, H = case.op, case.attrs, case.inputs, case.attrs["hidden_size"]
    G = len(ONNX_GATES[op])
    x = inp["X"] if a["layout"] == 0 else inp["X"].transpose(1, 0, 2)  # -> (T, S, I)
    S, dt = x.shape[1], x.dtype
    B = inp["B"][0] if "B" in inp else np.zeros(2 * G * H, dt)

    def state(key: str) -> np.ndarray:  # (D=1, S, H) or (S, D=1, H) -> (S, H)
        if key not in inp:
            return np.zeros((S, H), dt)
        return inp[key][0] if a["layout"] == 0 else inp[key][:, 0]

    out.update(x=x, weight_ih=_reorder(inp["W"][0], op, H), weight_hh=_reorder(inp["R"][0], op, H),
               bias_ih=_reorder(B[:G * H], op, H), bias_hh=_reorder(B[G * H:], op, H), h0=state("initial_h"))
    if op == "LSTM":
        P = inp["P"][0] if "P" in inp else np.zeros(3 * H, dt)
        out.update(c0=state("initial_c"), p_i=P[:H], p_o=P[H:2 * H], p_f=P[2 * H:], has_peepholes="P" in inp)
    if op == "GRU":
        out["linear_before_reset"] = int(a["linear_before_reset"])
    o = case.outputs
    if "Y" in o:  # (T, 1, S, H) or (S, T, 1, H) -> (T, S, H)
        out["y"] = o["Y"][:, 0] if a["layout"] == 0 else o["Y"][:, :, 0].transpose(1, 0, 2)
    for onnx_name, key in (("Y_h", "h_T"), ("Y_c", "c_T")):
        if onnx_name in o:  # (1, S, H) or (S, 1, H) -> (S, H)
            out[key] = o[onnx_name][0] if a["layout"] == 0 else o[onnx_name][:, 0]
    return out
