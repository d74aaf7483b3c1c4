"""LSH output layer vs dense output layers on an Amazon-670K-shaped synthetic set (issue 28).

Model: sparse features (F) -> H ReLU (codegen/sparse_input.py) -> C-way softmax output, trained
with Adam on the multi-label softmax cross-entropy (each sample's target spread over its labels);
the same first layer for every rnngraph variant, only the output layer differs:

  lsh            codegen/lsh_layer.py: DWTA hashing, active sets, sparse softmax, touched-rows Adam;
                 G-SLIDE's sets (LSHConfig(batch_labels=False))
  lsh-dense-adam the same with dense Adam over every row (G-SLIDE's optimizer)
  lsh-batch-labels  lsh with LSHConfig(batch_labels=True): every sample's active set also
                 holds its batch's labels (in-batch negatives; not G-SLIDE's), toward the same minimum
  dense-fp32     logits by cuBLAS SGEMM (codegen/gemm.py), codegen/lsh_sparse.py's dense_xent, SGEMMs back
  dense-bf16     the same with bf16 operands and fp32 accumulation (codegen/gemm_precision.py:
                 cublasGemmEx on bf16 copies made before each product); fp32 master weights, Adam in fp32
  torch-fp32     PyTorch: EmbeddingBag(sum, per-sample weights) + ReLU + Linear, torch.optim.Adam,
                 initialised as the rnngraph models (uniform, 1/sqrt(fan-in))
  torch-bf16     the same with the output Linear under autocast(bfloat16)

Measured per variant: seconds per epoch (the mean over ``--epochs``, after one warm-up batch
that compiles the kernels; the GPU synchronised at the end of each epoch), the final training
loss, and P@1 on the held-out samples after the same number of epochs (dense logits, arg-max;
a hit when the top class is one of the sample's labels). The LSH variants also report the mean
active-set size. Data: rnngraph/data/xc_synthetic.py with Amazon-670K's feature and label counts
and a stated subset of samples (``--train``, ``--test``).

Label frequencies (``--label-skew`` s, the generator's ``label_skew``): the default, 0, stays the
uniform draw (the same set as before the flag), where a label has about 1.5 training samples
and every model's P@1 is near 0 (0.0003 to 0.0015 on the H200): a speed test only. s >= ~1 gives
a long-tailed, Zipf-law set, as real extreme-classification sets are, where P@1 is meaningful: at
s = 1.1, 90% of the test samples have a label seen 20 times or more in training. The results'
``label_stats`` say how skewed the set is, with ``most_frequent_label_p_at_1``, the P@1 of always
answering the training set's most frequent label (0.137 at s = 1.0, 0.237 at s = 1.1 with the
default shape), the floor a model must beat.

  H200 (bench/lsh_gpu.sh):  python3 bench/lsh_gpu.py --out $OUT/lsh-gpu.json
  long-tailed labels:       python3 bench/lsh_gpu.py --label-skew 1.1 --out $OUT/lsh-gpu-skew1.1.json
  CPU check (numba's CUDA simulator, tiny shapes; tests/test_bench.py):
                            python bench/lsh_gpu.py --smoke
  (--smoke chooses the simulator, NUMBA_ENABLE_CUDASIM=1, unless the environment sets that
  variable or numba is already loaded). The exit status is 1 when a variant failed (its error
  is in the JSON).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rnngraph.lsh import LSHConfig  # noqa: E402

VARIANTS = ("lsh", "lsh-dense-adam", "lsh-batch-labels", "dense-fp32", "dense-bf16", "torch-fp32", "torch-bf16")
SMOKE = dict(train=8, test=4, features=40, labels=64, hidden=8, batch=4, epochs=1,
             lsh=dict(K=2, L=2, bin_size=4, capacity=8, min_active=8, rebuild_every=8, redraw_every=16))


def parse(argv=None) -> argparse.Namespace:
    """The command line (``argv``, sys.argv's when None) as a namespace, with ``config`` the
    :class:`LSHConfig` of the LSH flags; ``--smoke`` replaces the shape and the LSH config by SMOKE's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (CUDA simulator / NumPy)")
    ap.add_argument("--train", type=int, default=490_449, help="training samples (Amazon-670K's count)")
    ap.add_argument("--test", type=int, default=10_000)
    ap.add_argument("--features", type=int, default=135_909)
    ap.add_argument("--labels", type=int, default=670_091)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    # 1e-3: at 1/20 of the shape (33,504 labels, 24,522 samples; CPU) PyTorch's model reached P@1
    # 0.031 after 3 epochs with 1e-2 and 0.018 with 1e-3, but at the whole shape on the H200 1e-2 did
    # not learn (loss 13.1 = ln(670,091) after 3 epochs, P@1 0.0000) where 1e-3 did
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    add_lsh_flags(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label-skew", type=_label_skew, default=0.0,
                    help="Zipf exponent of the label frequencies (xc_synthetic's label_skew); 0: uniform, "
                         ">= ~1: long-tailed, where P@1 is meaningful")
    ap.add_argument("--out", default=None, help="JSON results file")
    a = ap.parse_args(argv)
    a.config = lsh_config(ap, a, SMOKE)
    return a


def add_lsh_flags(ap: argparse.ArgumentParser) -> None:
    """The LSH config's flags, G-SLIDE's Amazon-670K values by default: --K, --L, --min-active,
    --rebuild-every, --redraw-every (bench/lsh_crossover.py takes them too)."""
    ap.add_argument("--K", type=int, default=6)
    ap.add_argument("--L", type=int, default=50)
    ap.add_argument("--min-active", type=int, default=1500)
    ap.add_argument("--rebuild-every", type=int, default=6400)
    ap.add_argument("--redraw-every", type=int, default=128_000)


def lsh_config(ap: argparse.ArgumentParser, a: argparse.Namespace, smoke: dict, **fields) -> LSHConfig:
    """The LSHConfig of :func:`add_lsh_flags`' flags in ``a`` (and ``fields``, e.g. batch_labels);
    a bad value is argparse's one-line error naming the flags, --smoke or not. With ``a.smoke``,
    ``smoke``'s values but "lsh" are then set on ``a`` and its "lsh" dict makes the config."""
    try:
        config = LSHConfig(K=a.K, L=a.L, min_active=a.min_active, rebuild_every=a.rebuild_every,
                           redraw_every=a.redraw_every, **fields)
    except ValueError as e:  # a bad LSH flag: one line, not a traceback
        ap.error(f"{e} (the LSH flags --K, --L, --min-active, --rebuild-every, --redraw-every)")
    if not a.smoke:
        return config
    for k, v in smoke.items():
        if k != "lsh":
            setattr(a, k, v)
    return LSHConfig(**smoke["lsh"], **fields)


# ---------------------------------------------------------------------------- data on the device
class Split:
    """A split's CSR arrays on the device (features and labels), sliced per batch without copies.

    Attributes: n, the samples; f_off (n+1,) int64, f_ids int32, f_val float32 the features;
    l_off (n+1,) int64, l_ids int32 the labels (device arrays); host_f_off, host_l_off,
    host_labels their host copies; max_labels, the most labels of a sample.
    """

    def __init__(self, data, rows):
        """``data`` (an XCDataset), ``rows`` the indices of its samples in this split."""
        from numba import cuda
        fo, lo = data.feature_offsets, data.label_offsets
        take = lambda off, ids: np.concatenate([ids[off[i]:off[i + 1]] for i in rows])  # noqa: E731
        sizes = lambda off: np.r_[0, np.cumsum([off[i + 1] - off[i] for i in rows])].astype(np.int64)  # noqa: E731
        self.n = len(rows)
        self.host_f_off, self.host_l_off = sizes(fo), sizes(lo)
        self.host_labels = take(lo, data.label_ids).astype(np.int32)
        self.f_off, self.f_ids = cuda.to_device(self.host_f_off), cuda.to_device(take(fo, data.feature_ids))
        self.f_val = cuda.to_device(take(fo, data.feature_values).astype(np.float32))
        self.l_off, self.l_ids = cuda.to_device(self.host_l_off), cuda.to_device(self.host_labels)
        self.max_labels = int(np.diff(self.host_l_off).max())

    def batches(self, size):
        """Yields (s, e, f_off, l_off) a batch of ``size`` samples (the last maybe fewer): rows
        [s, e) and their (e-s+1,) int64 feature and label offsets, views of the device arrays (not
        rebased: they index f_ids and l_ids of the whole split)."""
        for s in range(0, self.n, size):
            e = min(s + size, self.n)
            yield s, e, self.f_off[s:e + 1], self.l_off[s:e + 1]

    def labels_of(self, i):
        """Sample ``i``'s labels, an int32 host array."""
        return self.host_labels[self.host_l_off[i]:self.host_l_off[i + 1]]


# ---------------------------------------------------------------------------- the rnngraph models
class SparseHidden:
    """The first layer: (F, H) feature-major weights, ReLU, dense Adam."""

    def __init__(self, features, hidden, lr, rng):
        """float32 weights (F, H) and bias (H,) uniform in +-1/sqrt(F) from ``rng`` (a NumPy
        Generator), their gradients and Adam moments zero, on the device; ``lr`` Adam's step size."""
        from numba import cuda
        b = 1 / np.sqrt(features)
        z = lambda *s: cuda.to_device(np.zeros(s, np.float32))  # noqa: E731
        self.w = cuda.to_device(rng.uniform(-b, b, (features, hidden)).astype(np.float32))
        self.b = cuda.to_device(rng.uniform(-b, b, hidden).astype(np.float32))
        self.gw, self.mw, self.vw, self.gb, self.mb, self.vb = (z(features, hidden), z(features, hidden),
                                                                z(features, hidden), z(hidden), z(hidden), z(hidden))
        self.lr, self.steps, self.h = lr, 0, {}

    def forward(self, split, f_off, n):
        """(n, H) float32 device array, ReLU(x W + b) of the batch with feature offsets ``f_off``
        ((n+1,) int64 into ``split``'s arrays); one buffer per batch size, overwritten next call."""
        from numba import cuda
        from rnngraph.codegen.sparse_input import sparse_linear_relu
        if n not in self.h:
            self.h[n] = cuda.device_array((n, self.w.shape[1]), np.float32)
        return sparse_linear_relu(f_off, split.f_ids, split.f_val, self.w, self.b, self.h[n])

    def backward_update(self, split, f_off, h, dh):
        """Gradients from ``dh`` ((n, H) float32, the loss's gradient at the ReLU output ``h``),
        then one Adam step of the weights and bias; gradients zeroed after."""
        from rnngraph.codegen.optim_kernels import adam_update, fill
        from rnngraph.codegen.sparse_input import sparse_linear_relu_backward
        sparse_linear_relu_backward(f_off, split.f_ids, split.f_val, h, dh, self.gw, self.gb)
        self.steps += 1
        for p, g, m, v in ((self.w, self.gw, self.mw, self.vw), (self.b, self.gb, self.mb, self.vb)):
            adam_update(p, g, m, v, self.lr, step=self.steps)
            fill(g, 0.0)


class LSHHead:
    """The LSH output layer (codegen/lsh_layer.py's DeviceLSHLayer) and the active-set sizes of
    the batches it trained on."""

    def __init__(self, a, hidden, rng, adam, max_labels, batch_labels=False):
        """``a`` the parsed flags (labels, LSH config, seed, lr), ``hidden`` H, ``adam`` "touched"
        or "dense", ``max_labels`` the most labels of a sample, ``batch_labels`` the config's
        (in-batch negatives); ``rng`` unused (the layer seeds its own)."""
        from rnngraph.codegen.lsh_layer import DeviceLSHLayer
        config = dataclasses.replace(a.config, batch_labels=batch_labels)
        self.layer = DeviceLSHLayer(hidden, a.labels, config, seed=a.seed, lr=a.lr, adam=adam, max_labels=max_labels)
        self.active = []

    def step(self, h, split, l_off):
        """One training step on ``h`` ((n, H) float32) with labels at ``l_off`` ((n+1,) int64 into
        split.l_ids); returns (loss, dh): (n,) float32 per-sample losses (nats) and (n, H) float32."""
        loss, dh = self.layer.train_batch(h, split.l_ids, l_off)
        offsets = self.layer.scratch(h.shape[0])["offsets"]
        self.active.append(offsets[h.shape[0]:h.shape[0] + 1])   # read after the epoch (no sync here)
        return loss, dh

    def logits(self, h, out):
        """``out`` ((n, C) float32) = the dense logits of ``h`` ((n, H) float32); returns out."""
        return self.layer.dense_logits(h, out)

    def stats(self):
        """{"mean_active_per_batch": the mean active-set size (labels, summed over a batch's
        samples) of the last 50 batches}; reads the device (synchronises)."""
        sizes = [int(o.copy_to_host()[0]) for o in self.active[-50:]]
        return {"mean_active_per_batch": float(np.mean(sizes)) if sizes else None}


class DenseHead:
    """Dense output layer: SGEMM (fp32) or cublasGemmEx on bf16 copies of the operands, fp32
    accumulation (codegen/gemm_precision.py, as ``precision="bf16"`` of a compiled step), dense_xent, Adam."""

    def __init__(self, a, hidden, rng, bf16):
        """float32 (C, H) weights and (C,) bias uniform in +-1/sqrt(H) from ``rng``, zero gradients
        and Adam moments, on the device; ``bf16`` for bf16 GEMM operands."""
        from numba import cuda
        b = 1 / np.sqrt(hidden)
        z = lambda *s: cuda.to_device(np.zeros(s, np.float32))  # noqa: E731
        C = a.labels
        self.w = cuda.to_device(rng.uniform(-b, b, (C, hidden)).astype(np.float32))
        self.b = cuda.to_device(rng.uniform(-b, b, C).astype(np.float32))
        self.gw, self.mw, self.vw, self.gb, self.mb, self.vb = (z(C, hidden), z(C, hidden), z(C, hidden), z(C), z(C),
                                                                z(C))
        self.lr, self.steps, self.precision, self.scratch = a.lr, 0, "bf16" if bf16 else "fp32", {}

    def _buffers(self, n):
        """(z, loss, dh): (n, C), (n,), (n, H) float32 device buffers for batches of ``n``, made once."""
        from numba import cuda
        if n not in self.scratch:
            self.scratch[n] = (cuda.device_array((n, self.w.shape[0]), np.float32), cuda.device_array(n, np.float32),
                               cuda.device_array((n, self.w.shape[1]), np.float32))
        return self.scratch[n]

    def logits(self, h, out):
        """``out`` ((n, C) float32) = h W^T + b for ``h`` (n, H) float32; returns out."""
        from rnngraph.codegen.gemm import add_bias, gemm
        gemm(h, self.w, out, trans_b=True, precision=self.precision)
        return add_bias(out, self.b)

    def step(self, h, split, l_off):
        """As :meth:`LSHHead.step`, with every one of the C logits."""
        from rnngraph.codegen.gemm import column_sum, gemm
        from rnngraph.codegen.lsh_sparse import dense_xent
        from rnngraph.codegen.optim_kernels import adam_update
        n = h.shape[0]
        z, loss, dh = self._buffers(n)
        gemm(h, self.w, z, trans_b=True, precision=self.precision)
        dense_xent(z, self.b, split.l_ids, l_off, loss, scale=1.0 / n)
        gemm(z, self.w, dh, precision=self.precision)
        gemm(z, h, self.gw, trans_a=True, precision=self.precision)
        column_sum(z, self.gb)
        self.steps += 1
        for p, g, m, v in ((self.w, self.gw, self.mw, self.vw), (self.b, self.gb, self.mb, self.vb)):
            adam_update(p, g, m, v, self.lr, step=self.steps)   # gw, gb are overwritten next step
        return loss, dh

    def stats(self):
        """{}: nothing beyond the common record."""
        return {}


def p_at_1(head, hidden, split, batch):
    """P@1 of the dense logits on ``split``, a float in [0, 1]: the fraction of its samples whose
    arg-max class is one of their labels (``hidden`` a SparseHidden, ``batch`` samples at a time)."""
    from numba import cuda
    hits = 0
    out = None
    for s, e, f_off, _ in split.batches(batch):
        h = hidden.forward(split, f_off, e - s)
        if out is None or out.shape[0] != e - s:
            out = cuda.device_array((e - s, head_classes(head)), np.float32)
        logits = head.logits(h, out)
        top = argmax_rows(logits)
        hits += sum(int(top[i - s] in split.labels_of(i)) for i in range(s, e))
    return hits / split.n


def head_classes(head):
    """C, the output layer's classes."""
    return head.layer.classes if isinstance(head, LSHHead) else head.w.shape[0]


def argmax_rows(x):
    """(n,) int64 host array, each row's arg-max of ``x`` ((n, C) float32 device array): by CuPy on
    the device where it is present, else on the host."""
    try:
        import cupy as cp
        from rnngraph.codegen.device import have_cupy
        if have_cupy():
            return cp.asnumpy(cp.asarray(x).argmax(axis=1))
    except ImportError:
        pass
    return x.copy_to_host().argmax(axis=1)


def sync():
    """Waits for the device's queued work (cuda.synchronize)."""
    from numba import cuda
    cuda.synchronize()


def run_rnngraph(a, variant, train, test):
    """Trains ``variant`` (an rnngraph one of VARIANTS) for a.epochs on ``train`` and returns its
    record: epoch_s (seconds a timed epoch), loss (each epoch's last batch's mean loss, nats),
    p_at_1 on ``test``, and the head's stats."""
    rng = np.random.default_rng(a.seed)
    hidden = SparseHidden(a.features, a.hidden, a.lr, rng)
    max_labels = max(train.max_labels, test.max_labels)
    if variant.startswith("lsh"):
        head = LSHHead(a, a.hidden, rng, "dense" if variant == "lsh-dense-adam" else "touched", max_labels,
                       batch_labels=variant == "lsh-batch-labels")
    else:
        head = DenseHead(a, a.hidden, rng, bf16=variant == "dense-bf16")
    rec = {"epoch_s": [], "loss": []}
    first = True
    for epoch in range(a.epochs):
        total = None
        t0 = time.perf_counter()
        for s, e, f_off, l_off in train.batches(a.batch):
            h = hidden.forward(train, f_off, e - s)
            loss, dh = head.step(h, train, l_off)
            hidden.backward_update(train, f_off, h, dh)
            if first:   # the first batch compiles (or loads) every kernel: not timed
                sync()
                t0, first = time.perf_counter(), False
            total = loss.copy_to_host().sum() / (e - s) if e == train.n else total
        sync()
        rec["epoch_s"].append(time.perf_counter() - t0)
        rec["loss"].append(float(total) if total is not None else None)
    rec["p_at_1"] = p_at_1(head, hidden, test, a.batch)
    rec.update(head.stats())
    return rec


# ---------------------------------------------------------------------------- PyTorch
def run_torch(a, variant, train, test):
    """As :func:`run_rnngraph` for "torch-fp32" or "torch-bf16" (PyTorch on the GPU, else the CPU),
    with the splits' host arrays; no head stats."""
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    emb = torch.nn.EmbeddingBag(a.features, a.hidden, mode="sum").to(dev)
    b1 = torch.nn.Parameter(torch.zeros(a.hidden, device=dev))
    with torch.no_grad():  # the rnngraph models' initialisation (SparseHidden), not EmbeddingBag's N(0, 1)
        bound = 1 / np.sqrt(a.features)
        emb.weight.uniform_(-bound, bound)
        b1.uniform_(-bound, bound)
    out = torch.nn.Linear(a.hidden, a.labels).to(dev)
    params = list(emb.parameters()) + [b1] + list(out.parameters())
    opt = torch.optim.Adam(params, lr=a.lr)
    bf16 = variant == "torch-bf16"
    T = lambda x, dt=None: torch.as_tensor(x, device=dev, dtype=dt)  # noqa: E731
    f_ids, f_val, f_off = (T(train.f_ids.copy_to_host(), torch.long), T(train.f_val.copy_to_host()),
                           train.host_f_off)
    l_ids, l_off = T(train.host_labels, torch.long), train.host_l_off

    def hidden(ids, vals, offs, s):
        """(n, H) ReLU output of a batch: ``ids`` int64, ``vals`` float32 tensors of its features,
        ``offs`` ((n+1,) int64 host) their offsets in the whole split; ``s`` unused."""
        return torch.relu(emb(ids, T(offs[:-1] - offs[0], torch.long), per_sample_weights=vals) + b1)

    rec = {"epoch_s": [], "loss": []}
    first = True
    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        for s in range(0, train.n, a.batch):
            e = min(s + a.batch, train.n)
            fo, lo = f_off[s:e + 1], l_off[s:e + 1]
            h = hidden(f_ids[fo[0]:fo[-1]], f_val[fo[0]:fo[-1]], fo, s)
            with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
                z = out(h)
            logp = torch.log_softmax(z.float(), dim=1)
            counts = np.diff(lo)
            rows = T(np.repeat(np.arange(e - s), counts), torch.long)
            w = T(np.repeat(1.0 / np.maximum(counts, 1), counts).astype(np.float32))
            loss = -(logp[rows, l_ids[lo[0]:lo[-1]]] * w).sum() / (e - s)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if first:
                if dev == "cuda":
                    torch.cuda.synchronize()
                t0, first = time.perf_counter(), False
        if dev == "cuda":
            torch.cuda.synchronize()
        rec["epoch_s"].append(time.perf_counter() - t0)
        rec["loss"].append(float(loss.detach()))
    hits = 0
    tf_ids, tf_val = T(test.f_ids.copy_to_host(), torch.long), T(test.f_val.copy_to_host())
    with torch.no_grad():
        for s in range(0, test.n, a.batch):
            e = min(s + a.batch, test.n)
            fo = test.host_f_off[s:e + 1]
            with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
                top = out(hidden(tf_ids[fo[0]:fo[-1]], tf_val[fo[0]:fo[-1]], fo, s)).argmax(dim=1).cpu().numpy()
            hits += sum(int(top[i - s] in test.labels_of(i)) for i in range(s, e))
    rec["p_at_1"] = hits / test.n
    return rec


# ---------------------------------------------------------------------------- main
def label_stats(train: Split, test: Split, labels: int) -> dict:
    """How long-tailed the set is: ``train``'s distinct labels and its most frequent label's
    count (ints), and ``most_frequent_label_p_at_1``, the P@1 on ``test`` of always answering that
    label (a float in [0, 1]), the floor a model must beat (near 0 for uniform labels, not for a
    skewed set). ``labels`` is C."""
    counts = np.bincount(train.host_labels, minlength=labels)
    top = counts.argmax()
    hits = [top in test.labels_of(i) for i in range(test.n)]
    return {"distinct_train_labels": int((counts > 0).sum()), "most_frequent_train_label_count": int(counts[top]),
            "most_frequent_label_p_at_1": float(np.mean(hits)) if hits else 0.0}


def _label_skew(text: str) -> float:
    """``--label-skew``'s value, checked as the generator checks it (xc_synthetic.py's
    ``check_label_skew``), or argparse's one-line error."""
    from rnngraph.data.xc_synthetic import check_label_skew
    try:
        return check_label_skew(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--label-skew takes a finite number >= 0, got {text!r}") from None


def main(argv=None) -> dict:
    """Runs the benchmark on the command line ``argv`` (module docstring); returns the results,
    also written to ``--out`` as JSON after each variant."""
    a = parse(argv)
    if a.smoke and "numba" not in sys.modules:  # the simulator is chosen when numba loads
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    from rnngraph.bench.results import device_name, versions, write_results
    from rnngraph.codegen.device import in_simulator
    from rnngraph.data.xc_synthetic import synthetic_xc

    t0 = time.perf_counter()
    data = synthetic_xc(a.train + a.test, a.features, a.labels, seed=a.seed, label_skew=a.label_skew).data
    train, test = Split(data, range(a.train)), Split(data, range(a.train, a.train + a.test))
    result = {"benchmark": "lsh_gpu", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "device": device_name(not in_simulator()), "versions": versions(), "smoke": a.smoke,
              "shape": {k: getattr(a, k) for k in ("train", "test", "features", "labels", "hidden", "batch", "epochs",
                                                  "lr", "seed", "label_skew")},
              "lsh_config": {k: getattr(a.config, k) for k in ("K", "L", "bin_size", "capacity", "min_active",
                                                                "rebuild_every", "redraw_every")},
              "data_s": time.perf_counter() - t0, "label_stats": label_stats(train, test, a.labels), "records": []}
    for variant in a.variants.split(","):
        rec = {"variant": variant}
        try:
            if variant not in VARIANTS:
                raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
            rec.update(run_torch(a, variant, train, test) if variant.startswith("torch")
                       else run_rnngraph(a, variant, train, test))
            rec["epoch_s_mean"] = float(np.mean(rec["epoch_s"]))
            print(f"{variant:<16} {rec['epoch_s_mean']:9.3f} s/epoch  P@1 {rec['p_at_1']:.4f}  loss {rec['loss'][-1]}",
                  flush=True)
        except Exception as e:  # a failed variant is a record, the others still run
            rec["error"] = f"{type(e).__name__}: {e}"
            print(f"{variant:<16} error: {rec['error']}", flush=True)
        result["records"].append(rec)
        write_results(a.out, result)  # each variant as it ends: a run cut short keeps the finished ones
    by = {r["variant"]: r for r in result["records"] if "error" not in r}
    for name in ("lsh", "lsh-dense-adam", "lsh-batch-labels"):
        if name in by and "dense-bf16" in by:
            result[f"{name}_over_dense_bf16_epoch"] = by[name]["epoch_s_mean"] / by["dense-bf16"]["epoch_s_mean"]
    write_results(a.out, result)
    return result


if __name__ == "__main__":
    failed = [r["variant"] for r in main()["records"] if "error" in r]
    raise SystemExit(f"failed variants: {', '.join(failed)}" if failed else 0)
