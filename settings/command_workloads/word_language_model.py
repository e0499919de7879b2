"""A user's training script, as a new user would point the suite at one: pytorch/examples
word_language_model/main.py (a 2-layer LSTM language model, truncated BPTT, plain SGD with gradient
clipping, lr / 4 when validation stops improving), its own log lines and nothing of gpu-pairs.

Standalone on purpose: torch only, no torchvision, no network, no import of pytest_gpu_pairs. The
corpus is generated in-process (seeded, with structure to learn, so the loss falls) with
Wikitext-2's sizes by default (33 278 words, 2 088 628 training tokens), so an epoch is
main.py's 2 983 batches of 20 x 35 tokens. It prints what main.py prints:

    | epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  6.09 | loss  5.46 | ppl   235.37

    python word_language_model.py --cuda --epochs 2
    python word_language_model.py --small        # a few seconds on a CPU: the smoke test
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WIKITEXT2 = {"vocab": 33278, "tokens": 2088628}
SMALL = {"vocab": 200, "tokens": 8000, "emsize": 16, "nhid": 16, "log_interval": 2}


def parse(argv):
    p = argparse.ArgumentParser(description="LSTM language model on a generated corpus (pytorch/examples style)")
    p.add_argument("--emsize", type=int, default=200, help="size of word embeddings")
    p.add_argument("--nhid", type=int, default=200, help="number of hidden units per layer")
    p.add_argument("--nlayers", type=int, default=2, help="number of layers")
    p.add_argument("--lr", type=float, default=20, help="initial learning rate")
    p.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    p.add_argument("--epochs", type=int, default=2, help="upper epoch limit")
    p.add_argument("--batch_size", type=int, default=20, metavar="N", help="batch size")
    p.add_argument("--bptt", type=int, default=35, help="sequence length")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers (0 = no dropout)")
    p.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    p.add_argument("--seed", type=int, default=1111, help="random seed")
    p.add_argument("--cuda", action="store_true", help="use CUDA")
    p.add_argument("--log-interval", type=int, default=200, metavar="N", help="report interval")
    p.add_argument("--vocab", type=int, default=WIKITEXT2["vocab"], help="vocabulary size of the generated corpus")
    p.add_argument("--tokens", type=int, default=WIKITEXT2["tokens"], help="training tokens per epoch")
    p.add_argument("--small", action="store_true", help="tiny sizes for a CPU smoke test")
    args = p.parse_args(argv)
    if args.small:
        for key, value in SMALL.items():
            setattr(args, key, value)
    return args


def generated_corpus(tokens: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """Words drawn from a Zipf distribution (frequency ~ 1 / rank, as in text), half of them replaced
    by the successor of the word drawn before: the loss falls as the model learns the frequencies,
    then the pairs."""
    weights = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    drawn = torch.multinomial(weights, tokens, replacement=True, generator=generator)
    follows = torch.rand(tokens, generator=generator) < 0.5
    return torch.where(follows, (torch.roll(drawn, 1) + 1) % vocab, drawn)


def batchify(data: torch.Tensor, bsz: int, device: torch.device) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous().to(device)


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder (main.py's model.py)."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float, tie_weights: bool):
        super().__init__()
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage_hidden(v) for v in h)


def get_batch(source: torch.Tensor, i: int, bptt: int):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def evaluate(model: RNNModel, data_source: torch.Tensor, bptt: int, eval_batch_size: int) -> float:
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * F.nll_loss(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train_epoch(model: RNNModel, train_data: torch.Tensor, epoch: int, lr: float, args) -> None:
    model.train()
    total_loss = 0.0
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.nll_loss(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            batches, ms_per_batch = len(train_data) // args.bptt, elapsed * 1000 / args.log_interval
            print(f"| epoch {epoch:3d} | {batch:5d}/{batches:5d} batches | lr {lr:02.2f} | ms/batch {ms_per_batch:5.2f} "
                  f"| loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}", flush=True)
            total_loss = 0.0
            start_time = time.time()


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    torch.manual_seed(args.seed)
    if args.cuda and not torch.cuda.is_available():
        print("--cuda given, but CUDA is not available", file=sys.stderr)
        return 2
    device = torch.device("cuda" if args.cuda else "cpu")
    generator = torch.Generator().manual_seed(args.seed)
    eval_batch_size = 10
    train_data = batchify(generated_corpus(args.tokens, args.vocab, generator), args.batch_size, device)
    val_data = batchify(generated_corpus(args.tokens // 10, args.vocab, generator), eval_batch_size, device)
    test_data = batchify(generated_corpus(args.tokens // 10, args.vocab, generator), eval_batch_size, device)
    model = RNNModel(args.vocab, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)

    lr, best_val_loss = args.lr, None
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train_epoch(model, train_data, epoch, lr, args)
        val_loss = evaluate(model, val_data, args.bptt, eval_batch_size)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s | valid loss {val_loss:5.2f} "
              f"| valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89, flush=True)
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            lr /= 4.0  # anneal the learning rate if no improvement has been seen in the validation set
    test_loss = evaluate(model, test_data, args.bptt, eval_batch_size)
    print("=" * 89)
    print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    print("=" * 89, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
