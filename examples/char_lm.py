"""A character-level LSTM language model on Jane Austen's novels, with the Python API.

    python examples/char_lm.py                # about 20 s on a CPU

Trains on the five training novels, validates on the first 20,000 characters of the held-out
one (Persuasion), then samples. The corpus is fetched once (Debian package
r-cran-janeaustenr) and cached; see rnngraph/data. The command-line equivalent:

    rnngraph train --hidden 128 --embed 32 --window 32 --streams 32 --lr 0.01 --steps 600 \
        --eval-every 200 --eval-tokens 20000 --device cpu --checkpoint /tmp/char_lm
"""
import math

import rnngraph as rg
from rnngraph.data import CharVocab, Corpus, batches
from rnngraph.lm import Evaluator, sample

WINDOW, STREAMS, STEPS = 32, 32, 600


def main():
    corpus = Corpus.austen()
    vocab = CharVocab.build(corpus.train)
    net = rg.Sequential(rg.Embedding(len(vocab), 32), rg.cells.lstm(hidden=128),
                        rg.SoftmaxCrossEntropy(len(vocab)))
    step = rg.compile(net, window=WINDOW, streams=STREAMS, device="cpu", optimizer=rg.Adam(lr=1e-2),
                      clip_norm=1.0)
    evaluate = Evaluator(net, window=WINDOW, streams=32)  # its own streams and states
    valid = vocab.encode(corpus.valid[:20_000])
    data = batches(vocab.encode(corpus.train), WINDOW, STREAMS)
    for k in range(1, STEPS + 1):
        x, y = next(data)  # (T, S) windows; each stream continues where the last window stopped
        loss = step.train(x, y)  # states carry to the next window (truncated BPTT)
        if k % 200 == 0:
            nats, _ = evaluate(step.parameters, valid)
            print(f"step {k}  train {loss / math.log(2):.3f}  valid {nats / math.log(2):.3f} bits/char")
    print("Elizabeth" + sample(net, step.parameters, vocab, prime="Elizabeth", length=200, temperature=0.6))


if __name__ == "__main__":
    main()
