"""Inspect what rnngraph makes of a network: the traced graph and the compiled schedule.

    python examples/inspect_schedule.py       # instant; no training, no data

A 2-layer language model: a peephole LSTM under a standard LSTM. The graph lists every node
with its op, size and inputs (``[t-1]`` marks a read of the previous timestep). The schedule
shows which kernels are hoisted out of the time loop (prologue/epilogue, once per window over
all T*S columns), what steps through time, and how the two layers' loops are arranged.
"""
import rnngraph as rg

VOCAB = 80


def main():
    net = rg.Sequential(rg.Embedding(VOCAB, 64), rg.cells.peephole_lstm(hidden=256),
                        rg.cells.lstm(hidden=256), rg.SoftmaxCrossEntropy(VOCAB))
    print(net.graph)
    print()
    for streams in (1, 64):  # few streams favour the wavefront, many the SCC-sequential plan
        step = rg.compile(net, window=100, streams=streams, device="cpu")
        print(step.schedule)
        print()


if __name__ == "__main__":
    main()
