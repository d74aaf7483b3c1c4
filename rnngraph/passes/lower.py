"""lower: turn the analysed Plan into a Schedule (the last pass).

Assumes: pipeline has run. Guarantees: a Schedule whose forward steps are, for scc-sequential,
phase 0, loop 0, phase 1, loop 1, ..., epilogue (empty phases left out), and for wavefront,
prologue, one loop holding every stage, epilogue; every computed node is in exactly one kernel.
The backward steps mirror them in reverse order: a phase's kernels reversed (a GEMM becomes an
input-gradient GEMM plus a weight-gradient GEMM, a gather a scatter-add); a loop runs in
reverse time with stage offsets mirrored and backward levels (a VJP that reads a whole gradient
vector needs a sync), followed by a phase with one weight-gradient GEMM per in-loop GEMM over
the whole window (Hwang & Sung 2015); gradients of vector parameters are column sums at the end.
Each loop's ``early_sums`` (layer norms whose row sums are taken a level early) come from
passes/row_sums.py, then its ``syncs`` (the levels whose end needs a grid sync) from
passes/grid_syncs.py; a persistent backward loop's ``post_sums`` (layer norms whose gain and bias
gradients are summed after it, each by a ``reduce`` kernel in the weight-gradient phase) from
passes/param_grad_sums.py; with ``options.flagged_exchange`` (rnngraph/schedule_options.py), a
loop's ``flagged`` values (GEMM inputs handed between blocks as tagged words instead of after a
grid sync) and the syncs they leave from passes/flag_exchange.py; a persistent forward loop's
``folded_biases`` (window products whose bias its GEMM store adds; with
``options.folded_biases``) from passes/folded_biases.py.
The Schedule keeps the options.
"""
from __future__ import annotations

from dataclasses import replace

from ..schedule import Kernel, Loop, Phase, Schedule
from .cost import backward_flops, node_flops
from .flag_exchange import with_flags
from .folded_biases import fold_biases
from .grid_syncs import grid_syncs
from .param_grad_sums import post_loop_sums
from .row_sums import early_row_sums
from .twin_biases import twin_biases
from .levels import backward_levels, hidden_unit, split_by_level
from .pipeline import wavefront_stages
from .plan import Plan

ALONE_KINDS = {"gather": "gather", "loss": "loss"}


class _Namer:
    def __init__(self):
        self.k = 0

    def __call__(self) -> str:
        self.k += 1
        return f"k{self.k - 1}"


def _kind(plan: Plan, grp) -> str:
    if plan.graph.by_name[grp[0]].op == "linear":
        return "gemm"
    kinds = {plan.kind(m) for m in grp}
    if len(grp) == 1 and kinds & set(ALONE_KINDS):
        return ALONE_KINDS[kinds.pop()]
    return "reduction" if "row_reduction" in kinds else "pointwise"


def _label(names) -> str:
    prefixes = sorted({n.rsplit(".", 1)[0] if "." in n else "-" for n in names})
    return ", ".join(prefixes)


class _Lowering:
    def __init__(self, plan: Plan):
        self.plan, self.g = plan, plan.graph
        self.name = _Namer()
        self.consumers = self.g.consumers()
        self.external = self.g.seeded
        self.is_param_node = {n.name for n in self.g.nodes if n.op == "param"}
        self.twins = twin_biases(self.g)  # a twin's bias gradient is summed by its partner's step

    # -------------------------------------------------------------- forward
    def kernel(self, grp, cols: int, level=0, stage=0, backward=False) -> Kernel:
        g, inside = self.g, set(grp)
        nodes = [g.by_name[m] for m in grp]
        reads, params = [], []
        for n in nodes:
            params += list(n.params)
            for r in n.args:
                if r.node in self.is_param_node:
                    params += list(g.by_name[r.node].params)
                elif r.node not in inside or r.delay:
                    reads.append(str(r))
        writes = [m for m in grp if m in self.external or any(c.name not in inside or r.delay
                                                              for c, r in self.consumers[m])]
        kind = _kind(self.plan, grp)
        rows = sum(n.size for n in nodes) if kind == "gemm" else max(n.size for n in nodes)
        flops = sum((backward_flops if backward else node_flops)(g, n) for n in nodes) * cols
        if backward:
            reads, writes = [f"d.{w}" for w in writes], [f"d.{r}" for r in reads if self._differentiable(r)]
            if kind == "loss":  # a loss with parameters (chunked_softmax_xent) adds their gradients itself
                writes += [f"d.{q}" for n in nodes for q in n.params]
            kind = {"gather": "scatter"}.get(kind, kind)
        return Kernel(self.name(), kind, tuple(grp), tuple(n.op for n in nodes), tuple(dict.fromkeys(reads)),
                      tuple(writes), tuple(dict.fromkeys(params)), rows, cols, flops, level, stage)

    def _differentiable(self, ref: str) -> bool:
        return self.g.differentiable(ref.split("[")[0])

    def wgrad(self, grp, cols: int) -> Kernel:
        g = self.g
        nodes = [g.by_name[m] for m in grp]
        params = tuple(p for n in nodes for p in n.params)
        # the gradients each step writes: a twin's bias is its partner's (passes/twin_biases.py)
        summed = tuple(p for n in nodes for p in (n.params[:1] if n.name in self.twins.values() else n.params)
                       + ((g.by_name[self.twins[n.name]].params[1],) if n.name in self.twins else ()))
        rows = sum(n.size for n in nodes)
        flops = sum(node_flops(g, n) for n in nodes) * cols
        reads = tuple(dict.fromkeys([f"d.{m}" for m in grp] + [str(nodes[0].args[0])]))
        return Kernel(self.name(), "wgrad", tuple(grp), ("linear",) * len(grp), reads,
                      tuple(f"d.{p}" for p in summed), params, rows, g.by_name[nodes[0].args[0].node].size, flops)

    def param_sums(self, m: str, cols: int) -> Kernel:
        """The ``reduce`` kernel summing layer norm ``m``'s gain and bias gradients over ``cols``
        columns after its backward loop (passes/param_grad_sums.py): reads the output gradient
        and the input, writes the parameter gradients; 6 FLOPs an element (xhat again, g * xhat,
        two sums)."""
        n = self.g.by_name[m]
        return Kernel(self.name(), "reduce", (m,), (n.op,), (f"d.{m}", str(n.args[0])),
                      tuple(f"d.{q}" for q in n.params), n.params, n.size, cols, 6 * n.size * cols)

    def groups_in(self, names) -> list[tuple[str, ...]]:
        names = set(names)
        return [grp for grp in self.plan.groups if grp[0] in names]

    def forward(self):
        p, T, S = self.plan, self.plan.window, self.plan.streams
        steps = []
        n_loops = len(p.loops)
        phase_name = lambda k: ("prologue" if k == 0 else "epilogue" if k == n_loops else f"between loop{k - 1} and loop{k}")
        if p.plan == "wavefront":
            pro = [m for m, k in p.phase_of.items() if k == 0]
            epi = [m for m, k in p.phase_of.items() if k > 0 and m not in p.body]
            bodies = [("loop", sorted(p.body), 0)]
            plan_steps = [("phase", pro, "prologue")] + bodies + [("phase", epi, "epilogue")]
        else:
            plan_steps = []
            for k in range(n_loops + 1):
                plan_steps.append(("phase", [m for m, ph in p.phase_of.items() if ph == k], phase_name(k)))
                if k < n_loops:
                    plan_steps.append(("loop", list(p.loops[k]), k))
        if not n_loops:
            plan_steps = [("phase", list(p.phase_of), "window")]
        for kind, names, label in plan_steps:
            grps = self.groups_in(names)
            if not grps:
                continue
            if kind == "phase":
                steps.append(Phase(label, tuple(self.kernel(grp, T * S) for grp in grps)))
            else:
                steps.append(self.loop(grps, label))
        return steps

    def loop(self, grps, index) -> Loop:
        p = self.plan
        ks = tuple(self.kernel(grp, p.streams, p.level_of[grp[0]], p.stage_of.get(grp[0], 0)) for grp in grps)
        offsets = sorted({k.stage for k in ks})
        stages = tuple((o, _label([m for k in ks if k.stage == o for m in k.ops])) for o in offsets)
        levels = max(k.level for k in ks)
        name = "loop" if p.plan == "wavefront" else f"loop{index}"
        loop = Loop(name, stages, ks, levels, p.mode.get(index, "persistent"), p.window + max(offsets))
        loop = replace(loop, early_sums=early_row_sums(self.g, loop))
        return with_flags(self.g, replace(loop, syncs=grid_syncs(self.g, loop)), p.options)

    # -------------------------------------------------------------- backward
    def backward(self, forward) -> list:
        steps = []
        for step in reversed(forward):
            if isinstance(step, Phase):
                ks = []
                for k in reversed(step.kernels):
                    ks.append(self.kernel(k.ops, k.cols, backward=True))
                    if k.kind == "gemm":
                        ks.append(self.wgrad(k.ops, k.cols))
                steps.append(Phase(f"{step.name} (backward)", tuple(ks)))
            else:
                steps += self.backward_loop(step)
        sums = [n.name for n in self.g.nodes if n.op == "param"]
        if sums:
            T, S = self.plan.window, self.plan.streams
            ks = tuple(Kernel(self.name(), "reduce", (m,), ("param",), (f"d.{m}",),
                              tuple(f"d.{q}" for q in self.g.by_name[m].params), self.g.by_name[m].params,
                              self.g.by_name[m].size, T * S, self.g.by_name[m].size * T * S) for m in sums)
            steps.append(Phase("parameter sums", ks))
        return steps

    def backward_loop(self, loop: Loop) -> list:
        p, g = self.plan, self.g
        names = [m for k in loop.kernels for m in k.ops]
        inside = set(names)
        nodes = [n for n in g.nodes if n.name in inside]
        stage = wavefront_stages(p, inside, reverse=True) if p.plan == "wavefront" else dict.fromkeys(inside, 0)
        same = lambda n, r: r.delay == 0 and r.node in inside and stage[r.node] == stage[n.name]
        if p.plan == "naive":  # one kernel per op, each on its own level, in reverse order
            blevel = {n.name: len(nodes) - k for k, n in enumerate(nodes)}
        else:
            blevel = backward_levels(p, nodes, same, hidden_unit(p, names), stage)
        grps = split_by_level([k.ops for k in reversed(loop.kernels)], blevel)
        ks = tuple(self.kernel(grp, p.streams, blevel[grp[0]], stage[grp[0]], backward=True) for grp in grps)
        offsets = sorted({k.stage for k in ks})
        stages = tuple((o, _label([m for k in ks if k.stage == o for m in k.ops])) for o in offsets)
        back = Loop(f"{loop.name} (backward)", stages, ks, max(blevel.values()), loop.mode,
                    p.window + max(offsets), True)
        back = replace(back, early_sums=early_row_sums(g, back))
        recompute = {m: k.ops for k in loop.kernels for m in k.ops}
        back = with_flags(g, replace(back, syncs=grid_syncs(g, back, recompute)), p.options, recompute)
        back = replace(back, post_sums=post_loop_sums(g, back, p.options))
        wg = tuple(self.wgrad(k.ops, p.window * p.streams) for k in loop.kernels if k.kind == "gemm")
        wg += tuple(self.param_sums(m, p.window * p.streams) for m in back.post_sums)
        return [back] + ([Phase(f"{loop.name} weight gradients", wg)] if wg else [])


def lower(plan: Plan) -> Schedule:
    """Build the Schedule (see the module docstring)."""
    low = _Lowering(plan)
    fwd = low.forward()
    if plan.options.folded_biases:
        fwd = fold_biases(plan.graph, fwd)
    bwd = low.backward(fwd)
    return Schedule(plan.graph, plan.window, plan.streams, plan.dtype, plan.plan, plan.reason, tuple(fwd), tuple(bwd),
                    plan.options)
