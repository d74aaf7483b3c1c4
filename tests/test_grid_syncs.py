"""passes/grid_syncs.py: which levels of a persistent loop end with a grid sync.

Besides the hand-derived cases, every schedule is checked by an element-level race check written
apart from the pass (it shares the pass's inputs, the kernels' reads and writes and
passes/ownership.py's units, not its tick arithmetic or its access model): it replays each tick
of the loop (stages active only where 0 <= t < T), gives each element to the block that owns it
(codegen/loop.py's split j0 = b*u // B of the level's unit u), lets every block with work read
the whole input vector of a GEMM (and a forward layer norm's shift x[t-1, s, 0]; the row sums,
at the end of the previous level for ``Loop.early_sums``, add into one sum per layer norm from
every block: atomic adds, which commute with each other but not with reads), and fails when two
blocks touch one element of one value at one timestep, one of them writing, with no grid sync
between them. A GEMM's read of a flagged value (``Loop.flagged``, passes/flag_exchange.py) polls
each element's tag instead: it must come after the element's write (or read the initial state). The numerics of the elided syncs on real blocks are
checked by the GPU tier."""
import re

import pytest
from hypothesis import HealthCheck, given, settings

import rnngraph as rg
from extra_cells import prenorm_rnn
from random_cells import random_graphs
from rnngraph.passes import schedule
from rnngraph.passes.grid_syncs import Access, _access, _collide, grid_syncs, sync_levels
from rnngraph.passes.ownership import level_unit
from rnngraph.schedule import Loop

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
#: S=1's defaults without the flagged exchange: the grid syncs alone
NO_FLAGS = rg.ScheduleOptions.defaults(1).replace(flagged_exchange=False)
FLAGS = rg.ScheduleOptions.defaults(1)  # S=1's defaults: flagged exchange on


def loops(net_or_graph, T=4, S=1, options=None):
    g = getattr(net_or_graph, "graph", net_or_graph)
    s = schedule(g, T, S, "float32", None, options)
    return g, s, [st for st in s.forward + s.backward if isinstance(st, Loop)]


def _owner(e: int, u: int, B: int) -> int:
    k = e % u
    return next(b for b in range(B) if (b * u) // B <= k < ((b + 1) * u) // B)


def races(g, s, loop: Loop, B: int = 2) -> list[str]:
    """Element-level race check of ``loop`` over the schedule's window (see the module docstring)."""
    T = s.window
    recompute = {m: k.ops for st in s.forward if isinstance(st, Loop) for k in st.kernels for m in k.ops}
    found, pending = [], {}  # (value, t, element) -> [(block, write)] since the last grid sync
    written = set()  # (value, t, element) stored so far (a flagged value's readers poll for them)
    top = max(o for o, _ in loop.stages)

    def touch(value, t, e, block, write, where):  # write: False, True or "add" (atomic adds commute)
        key = (value, t, e)
        for b, w in pending.get(key, []):
            if b != block and (w or write) and not w == write == "add":
                found.append(f"{where}: {value}[t={t}][{e}] by blocks {b} and {block}")
        pending.setdefault(key, []).append((block, write))

    def parse(ref, t):
        m = re.match(r"^(.+?)(?:\[t-(\d+)\])?$", ref)
        name = m[1]
        return name, t - int(m[2] or 0), g.by_name[name[2:] if name.startswith("d.") else name].size

    for tick in range(T + top):
        for level in range(1, loop.levels + 1):
            ks = [k for k in loop.kernels if k.level == level]
            if not ks:
                continue
            u = level_unit(g, ks, loop.reverse, recompute)
            busy = [b for b in range(B) if ((b + 1) * u) // B > (b * u) // B]
            active = []
            for k in ks:
                t = (T - 1 - (tick - k.stage)) if loop.reverse else tick - k.stage
                if 0 <= t < T:
                    active.append((k, t))
            where = f"{loop.name} tick {tick} level {level}"

            def row_sums(t, n, unit, label):
                """A layer norm's row sums at timestep t by blocks split by ``unit``: the summed
                row at their own elements, the shift x[t-1, s, 0] (forward), the sums (all)."""
                ref = f"d.{n.name}" if loop.reverse else str(n.args[0])
                value, tt, size = parse(ref, t)
                for e in range(size):
                    touch(value, tt, e, _owner(e, unit, B), False, label)
                workers = [b for b in range(B) if ((b + 1) * unit) // B > (b * unit) // B]
                for b in workers:
                    if not loop.reverse and tt > 0:
                        touch(value, tt - 1, 0, b, False, label + " shift")
                    touch("sums:" + n.name, t, 0, b, "add", label + " sums")

            norms = [(k, t, g.by_name[m]) for k, t in active for m in k.ops
                     if g.by_name[m].op == "layer_norm" and m not in loop.early_sums]
            for k, t, n in norms:  # row-sum phase, then the reduction sync
                row_sums(t, n, u, where + " row sums")
            if any(op == "layer_norm" and m not in loop.early_sums for k in ks for m, op in zip(k.ops, k.op_names)):
                pending.clear()  # the emitter syncs even where no stage is active
            for k, t in active:
                for m in k.ops:
                    if m in loop.early_sums:  # the layer norm reads the finished sums
                        for b in busy:
                            touch("sums:" + m, t, 0, b, False, f"{where} {k.name} sums")
                for ref in k.reads:
                    value, tt, size = parse(ref, t)
                    if k.kind == "gemm" and value in loop.flagged:  # polled words: written before, or the initial state
                        if tt >= 0 and any((value, tt, e) not in written for e in range(size)):
                            found.append(f"{where} {k.name}: flagged {value}[t={tt}] read before it is written")
                        continue
                    for e in range(size):
                        for b in (busy if k.kind == "gemm" else [_owner(e, u, B)]):
                            touch(value, tt, e, b, False, f"{where} {k.name}")
                for ref in k.writes:
                    value, tt, size = parse(ref, t)
                    for e in range(size):
                        touch(value, tt, e, _owner(e, u, B), True, f"{where} {k.name}")
                        written.add((value, tt, e))
            for k in loop.kernels:  # the next level's early row sums, by this level's blocks
                t = (T - 1 - (tick - k.stage)) if loop.reverse else tick - k.stage
                if k.level == level + 1 and 0 <= t < T:
                    for m in k.ops:
                        if m in loop.early_sums:
                            row_sums(t, g.by_name[m], u, f"{where} early row sums of {m}")
            if level in loop.sync_after:
                pending.clear()
    return found


@pytest.mark.parametrize("cell", sorted(rg.cells.STANDARD))
@pytest.mark.parametrize("layers", [1, 2])
def test_standard_cells_have_no_races(cell, layers):
    # the grid syncs alone (flags: tests/test_flag_exchange.py)
    g, s, ls = loops(rg.stacked(rg.cells.STANDARD[cell], layers, 6, input_size=5), options=NO_FLAGS)
    for loop in ls:
        assert races(g, s, loop, B=4) == [], loop.name


def test_lstm_backward_syncs_once_a_timestep():
    """Level 2 (dh[t-1] += U^T dG[t]) reads the gate gradients of every block: a sync after
    level 1; the next timestep's pointwise VJP reads dh only at its own units: none after 2
    (without S=1's default flags, which leave none)."""
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), options=NO_FLAGS)
    assert (fwd.levels, fwd.syncs) == (1, (1,))  # h[t-1] feeds every block's GEMM rows
    assert (bwd.levels, bwd.syncs) == (2, (1,))
    assert "2 levels per timestep (initiation interval), grid sync after level 1, 4 ticks" in str(s)


def test_every_sync_of_the_lstm_backward_is_needed():
    """Dropping the one remaining sync makes the race check fail (so it can see races)."""
    from dataclasses import replace
    g, s, (_, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), options=NO_FLAGS)
    assert races(g, s, replace(bwd, syncs=())), "the race check found nothing without syncs"
    assert races(g, s, replace(bwd, syncs=(2,)))


def test_layer_norm_row_sums_move_to_the_producing_level():
    """layernorm_lstm: each layer norm's row is written one level before it (forward: the GEMM
    U h, then the gates; backward: the gradients of LN_c's and LN_h's outputs), so its sums are
    taken there (passes/row_sums.py) and no reduction sync remains; the sums, read whole by the
    layer norm's level, keep a grid sync after each producing level."""
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=NO_FLAGS)
    assert fwd.early_sums == ("layer0.ln_h", "layer0.c_next") and fwd.reduction_syncs == 0
    assert bwd.early_sums == ("layer0.c_next", "layer0.ln_h") and bwd.reduction_syncs == 0
    assert fwd.syncs == (1, 2, 3)  # 3 grid syncs a timestep (5 with two reduction syncs)
    assert bwd.levels == 4 and bwd.syncs == (1, 2, 3)  # none before the next timestep's VJP
    assert "row sums one level early (no reduction sync): layer0.ln_h, layer0.c_next" in str(s)


def test_every_sync_of_the_layer_norm_loops_is_needed():
    """Dropping any one sync of layernorm_lstm's loops makes the race check fail; after levels
    1 and 2 (forward) and 1 and 2 (backward) it is the early row sums that would be read by the
    next level before every block has added its part."""
    from dataclasses import replace
    for options in (NO_FLAGS, FLAGS):  # with the flagged h and d.U only the row sums' syncs stay
        g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=options)
        assert len(fwd.syncs) == len(bwd.syncs) == (3 if options is NO_FLAGS else 2)
        for lp in (fwd, bwd):
            for drop in lp.syncs:
                found = races(g, s, replace(lp, syncs=tuple(x for x in lp.syncs if x != drop)), B=4)
                assert found, (lp.name, drop)
                assert ("sums:" in found[0]) == (drop in (1, 2)), (lp.name, drop, found[0])


def test_layer_norm_of_an_older_row_keeps_its_reduction_sync():
    g, s, (fwd, bwd) = loops(rg.stacked(prenorm_rnn, 1, 8, input_size=4), options=NO_FLAGS)
    assert fwd.early_sums == () and fwd.reduction_syncs == 1
    assert races(g, s, fwd, B=4) == [] and races(g, s, bwd, B=4) == []
    # with S=1's flagged exchange the layer norm's output, which the GEMM reads whole, is flagged:
    # the forward keeps only the reduction sync of its row sums
    g, s, (fwd, bwd) = loops(rg.stacked(prenorm_rnn, 1, 8, input_size=4))
    assert (fwd.flagged, fwd.syncs, fwd.reduction_syncs) == (("layer0.ln",), (), 1)
    assert races(g, s, fwd, B=4) == [] and races(g, s, bwd, B=4) == []


@rg.cell
def diagonal_rnn(x, h: rg.State, *, hidden: int):
    """IndRNN-like: h' = tanh(W x + u * h), the recurrence element-wise (Li et al. 2018)."""
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.param("u", hidden) * h)
    return h_next, {"h": h_next}


def test_elementwise_recurrence_needs_no_grid_sync():
    g, s, ls = loops(rg.stacked(diagonal_rnn, 1, 8, input_size=4))
    assert ls and all(loop.syncs == () for loop in ls), [(lp.name, lp.syncs) for lp in ls]
    assert "no grid sync" in str(s)
    for loop in ls:
        assert races(g, s, loop, B=3) == []


def test_collision_rule():
    own = Access("h", 0, True, False, 8)
    assert not _collide(own, 0, Access("h", 0, False, False, 8), 0)  # same unit: same block
    assert _collide(own, 0, Access("h", 0, False, False, 4), 0)  # other unit: other blocks
    assert _collide(own, 0, Access("h", -1, False, True, 8), 1)  # a GEMM reads it next tick
    assert not _collide(own, 0, Access("h", -1, False, True, 8), 0)  # ... not this tick's row
    assert not _collide(Access("h", 0, False, True, 8), 0, Access("h", 0, False, True, 8), 0)  # reads


def test_graph_mode_syncs_every_level():
    from dataclasses import replace
    g, s, (_, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4))
    assert grid_syncs(g, replace(bwd, mode="graph")) == (1, 2)


@SETTINGS
@given(random_graphs(max_blocks=2))
def test_random_cells_have_no_races(g):
    g, s, ls = loops(g, T=5)
    for loop in ls:
        if loop.mode == "persistent":
            assert races(g, s, loop, B=2) == [], loop.name


def test_json_export_lists_the_sync_levels():
    from rnngraph.schedule_export import to_json
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=NO_FLAGS)
    steps = {st["name"]: st for st in to_json(s)["forward"] + to_json(s)["backward"] if st["type"] == "loop"}
    assert steps[fwd.name]["grid_syncs_after"] == [1, 2, 3] and steps[bwd.name]["grid_syncs_after"] == [1, 2, 3]
    # the options, and which are not S=1's defaults (the text dump's "options (not the defaults ...)")
    assert to_json(s)["options"]["flagged_exchange"] is False
    assert to_json(s)["options_changed"] == {"flagged_exchange": False}
    _, s, _ = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=FLAGS)
    assert to_json(s)["options"]["flagged_exchange"] is True and to_json(s)["options_changed"] == {}
    assert steps[fwd.name]["early_row_sums"] == ["layer0.ln_h", "layer0.c_next"] and steps[fwd.name]["reduction_syncs"] == 0
    assert steps[fwd.name]["post_loop_sums"] == [] and steps[bwd.name]["post_loop_sums"] == ["layer0.c_next", "layer0.ln_h"]


@pytest.mark.parametrize("reverse", [False, True])
def test_the_timestep_arithmetic_places_the_sync(reverse):
    """Two levels: 1 reads a whole vector v at t-1 (forward) or t+1 (backward: a stage's
    timestep t counts down, so the value written one tick earlier is v[t+1]); 2 writes v at t
    on owned elements. The read of tick k+1 meets the write of tick k: the sync goes after
    level 2 (between timesteps), none after level 1. A wrong sign for the delay (or the
    direction) moves the collision and the sync to after level 1."""
    read = "v[t-1]" if not reverse else None
    if reverse:  # in a reverse loop the gradient flows to t-1: write d.v[t-1], read d.v at t next tick
        levels = [([], [_access("d.v", 0, True, False, True, 8)]), ([], [_access("d.v[t-1]", 0, True, True, False, 8)])]
    else:
        levels = [([], [_access(read, 0, False, False, True, 8)]), ([], [_access("v", 0, False, True, False, 8)])]
    assert sync_levels(levels) == (2,)

