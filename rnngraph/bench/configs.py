"""What is benchmarked: the implementations' names, a configuration (:class:`Config`), which
implementations apply to it, and its forward FLOPs."""
from __future__ import annotations

from dataclasses import dataclass


IMPLS = ("rnngraph", "rnngraph-naive", "rnngraph-wavefront", "rnngraph-scc-sequential", "cudnn-fp32",
         "cudnn-tf32", "torch-eager", "torchscript", "torch-compile", "torch-compile-cell", "rnngraph-cpu",
         "rnngraph-tf32", "rnngraph-bf16", "rnngraph-tf32-mma", "rnngraph-bf16-mma", "cudnn-fp16", "cudnn-bf16")
#: rnngraph in a reduced precision (rnngraph/precision.py): impl -> (precision, the persistent loops'
#: recurrent products on tensor cores too, ScheduleOptions.loop_tensor_cores: forced either way, so
#: that each impl times one kind of loop whatever the defaults choose for the shape)
PRECISION_IMPLS = {"rnngraph-tf32": ("tf32", False), "rnngraph-bf16": ("bf16", False),
                   "rnngraph-tf32-mma": ("tf32", True), "rnngraph-bf16-mma": ("bf16", True)}
#: cuDNN in half precision: the module, its input and its output gradient in this torch dtype
CUDNN_HALF = {"cudnn-fp16": "float16", "cudnn-bf16": "bfloat16"}
#: rnngraph implementations that force a plan (to check the cost model's choice against a measurement)
FORCED_PLANS = {"rnngraph-naive": "naive", "rnngraph-wavefront": "wavefront",
                "rnngraph-scc-sequential": "scc-sequential"}
#: Gate blocks of each standard cell's input and recurrent products (G in 2·G·H·(I+H)·S·T).
GATES = {"lstm": 4, "peephole_lstm": 4, "layernorm_lstm": 4, "gru": 3, "gru_reset_before": 3, "elman": 1}
CUDNN_CELLS = {"lstm": "LSTM", "gru": "GRU"}
TORCH_CELLS = ("lstm", "peephole_lstm", "gru", "layernorm_lstm")  # bench/torch_cells.py
#: torch-compile compiles the whole window's loop (minutes); torch-compile-cell only the cell, called
#: once per timestep by the eager loop (seconds to compile)
TORCH_MODES = {"torch-eager": "eager", "torchscript": "script", "torch-compile": "compile",
               "torch-compile-cell": "compile-cell"}
PROTOCOL = ("CUDA events, median of `iters` timed calls after `warmup` (fastrnns: 100 after 10; "
            "fewer for calls slower than max_seconds/iters, see each record); fwd without gradients; "
            "fwdbwd = forward + backward with weight gradients, optimizer excluded; step_ms (LM) = "
            "step.train: forward, BPTT, clip, Adam, wall clock")
COMPILE_ESTIMATE_S = 120.0  # torch.compile of a 100-step loop took 106 s on the H200 (ARCHITECTURE.md)


@dataclass(frozen=True)
class Config:
    """One benchmark configuration: a stack of ``layers`` cells of hidden size H over a window of
    T timesteps and S streams with inputs of size I. With ``vocab`` it is a char-level language
    model instead: Embedding(vocab, I) -> cells -> SoftmaxCrossEntropy(vocab)."""

    cell: str = "lstm"
    layers: int = 1
    T: int = 100
    S: int = 64
    H: int = 512
    I: int = 512
    dtype: str = "float32"
    vocab: int | None = None

    @property
    def task(self) -> str:
        return "lm" if self.vocab else "layer"

    def label(self, impl: str | None = None) -> str:
        """``lstm-l1-t100-s64-h512-i512/rnngraph`` (``lm-...-v96`` for a language model): what
        ``--only REGEX`` is matched against."""
        s = f"{self.cell}-l{self.layers}-t{self.T}-s{self.S}-h{self.H}-i{self.I}"
        s = f"lm-{s}-v{self.vocab}" if self.vocab else s
        return s if impl is None else f"{s}/{impl}"

    def fields(self) -> dict:
        d = {"cell": self.cell, "layers": self.layers, "T": self.T, "S": self.S, "H": self.H, "I": self.I,
             "dtype": self.dtype, "task": self.task}
        if self.vocab:
            d["vocab"] = self.vocab
        return d


def flops_forward(cell: str, layers: int, T: int, S: int, H: int, I: int, vocab: int | None = None) -> float | None:
    """FLOPs of one forward window: 2·G·H·(I_k+H)·S·T per layer (G = 4 gate blocks for LSTMs, 3 for
    GRUs; I_k = I for layer 0, H above), plus 2·vocab·H·S·T for an LM's softmax head. Pointwise
    work is not counted. The backward costs about twice the forward. None for an unknown cell."""
    if cell not in GATES:
        return None
    g = GATES[cell]
    total = sum(2.0 * g * H * ((I if k == 0 else H) + H) * S * T for k in range(layers))
    return total + (2.0 * vocab * H * S * T if vocab else 0.0)


def tflops(flops: float | None, ms: float | None) -> float | None:
    """TFLOP/s of ``flops`` done in ``ms`` milliseconds (None when either is missing)."""
    if not flops or not ms:
        return None
    return flops / (ms * 1e9)


def applicable(cfg: Config, impl: str) -> str | None:
    """None when ``impl`` can run ``cfg``, else why not."""
    if impl not in IMPLS:
        return f"unknown implementation {impl!r} (have {', '.join(IMPLS)})"
    if cfg.task == "lm":
        return None if impl in ("rnngraph", "rnngraph-cpu") else f"{impl} does not run language models"
    if impl == "rnngraph-cpu":
        return "rnngraph-cpu times a language-model step (give Config.vocab)"
    if impl.startswith("cudnn") and cfg.cell not in CUDNN_CELLS:
        return f"cuDNN has no {cfg.cell}"
    if impl in TORCH_MODES and cfg.cell not in TORCH_CELLS:
        return f"no PyTorch form of {cfg.cell}"
    return None
