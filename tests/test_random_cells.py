"""Hypothesis properties over random cells: gradients match central differences; the IR
round-trips through its text form; validation accepts what the generator guarantees."""
import warnings

from hypothesis import HealthCheck, given, settings

import rnngraph as rg
from gradcheck import check_graph
from random_cells import random_graphs

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _validated(g):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rg.UnusedWarning)  # random cells may leave x unread
        return rg.passes.validate(g)


@SETTINGS
@given(random_graphs())
def test_random_cell_gradients(g):
    g = _validated(g)
    check_graph(g, T=4, S=2, seed=0, most=6)


@SETTINGS
@given(random_graphs())
def test_print_parse_round_trip(g):
    g = _validated(g)
    assert rg.parse(str(g)) == g
    assert str(rg.parse(str(g))) == str(g)
