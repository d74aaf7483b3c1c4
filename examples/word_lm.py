"""A word-level GRU language model on Jane Austen's novels, with the Python API.

    python examples/word_lm.py                # about 20 s on a CPU

Words are lowercased tokens (punctuation and newlines are tokens too); the vocabulary keeps
the 2,000 most frequent training words plus <unk> (the command line's default keeps every
word type of the training split).
Reports validation perplexity on the first 3,000 words of the held-out novel, then samples.
The command-line equivalent:

    rnngraph train --level word --max-words 2000 --cell gru --hidden 128 --embed 64 --window 20 \
        --streams 16 --lr 0.005 --steps 200 --eval-every 100 --eval-tokens 3000 --device cpu
"""
import math

import rnngraph as rg
from rnngraph.data import Corpus, WordVocab, batches
from rnngraph.lm import Evaluator, sample

WINDOW, STREAMS, STEPS = 20, 16, 200


def main():
    corpus = Corpus.austen()
    vocab = WordVocab.build(corpus.train, max_words=2000)
    net = rg.Sequential(rg.Embedding(len(vocab), 64), rg.cells.gru(hidden=128),
                        rg.SoftmaxCrossEntropy(len(vocab)))
    step = rg.compile(net, window=WINDOW, streams=STREAMS, device="cpu", optimizer=rg.Adam(lr=5e-3),
                      clip_norm=1.0)
    evaluate = Evaluator(net, window=WINDOW, streams=16)
    valid = vocab.encode(corpus.valid)[:3001]
    data = batches(vocab.encode(corpus.train), WINDOW, STREAMS)
    print(f"{len(vocab)} words in the vocabulary, {len(data.ids):,} training tokens")
    for k in range(1, STEPS + 1):
        x, y = next(data)
        loss = step.train(x, y)
        if k % 100 == 0:
            nats, _ = evaluate(step.parameters, valid)
            print(f"step {k}  train perplexity {math.exp(loss):.1f}  valid perplexity {math.exp(nats):.1f}")
    print("she " + sample(net, step.parameters, vocab, prime="she", length=40, temperature=0.7))


if __name__ == "__main__":
    main()
