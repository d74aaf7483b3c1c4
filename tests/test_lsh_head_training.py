"""A tiny extreme classifier trained with the ``rg.LSHSoftmax`` head on the NumPy backend:
float inputs (the densified features of ``synthetic_xc``, 200 labels, one a sample) -> an
Elman layer of 32 (one timestep, states reset: a dense tanh layer) -> LSH softmax with at least
16 of the 200 classes active a column. After 60 training calls of 64 samples its P@1 on 1,000
held-out samples, measured with the dense evaluation (as G-SLIDE measures it), is far above
chance (1/200); the index is rebuilt on the config's clock."""
import numpy as np

import rnngraph as rg
from rnngraph.data import synthetic_xc
from rnngraph.lsh import LSHConfig

V, F, H, B, STEPS = 200, 64, 32, 64, 60


def _dense_data():
    data = synthetic_xc(4000, F, V, seed=1, prototype_features=8, max_labels=1, noise_features=4).data
    x = np.zeros((len(data), F), np.float32)
    for i in range(len(data)):
        ids, values = data.features(i)
        np.add.at(x[i], ids, values)
    return x, data.label_ids[data.label_offsets[:-1]].astype(np.int64)


def test_lsh_head_learns_the_planted_labels():
    x, y = _dense_data()
    config = LSHConfig(K=3, L=8, bin_size=4, capacity=16, min_active=16, rebuild_every=5 * B, redraw_every=20 * B)
    net = rg.Sequential(rg.cells.elman(hidden=H), rg.LSHSoftmax(V, config, seed=2), input_size=F)
    step = rg.compile(net, window=1, streams=B, device="cpu", optimizer=rg.Adam(lr=0.05), seed=0)
    train_rows = 3000 - 3000 % B
    for s in range(STEPS):
        i = s * B % train_rows
        step.reset_state()
        step.train(x[None, i:i + B], y[None, i:i + B])
    h = step.forward(x[None, 3000:], carry=False).outputs["layer0.h_next"][0]
    p_at_1 = np.mean(rg.LSHSoftmax.dense_logits(h, step.parameters).argmax(axis=1) == y[3000:])
    assert p_at_1 > 0.12, p_at_1  # chance: 0.005 (0.189 with these seeds)
    assert step._lsh.index.clock.samples == STEPS * B  # every column counted for the rebuilds
