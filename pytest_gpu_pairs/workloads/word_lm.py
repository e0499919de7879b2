"""pytorch/examples word_language_model: a 2-layer LSTM language model on Wikitext-2.

Default sizes of main.py: embeddings and hidden state 200, 2 layers, dropout 0.2, untied
weights, Wikitext-2's 33 278-word vocabulary (13.99 M parameters); truncated BPTT over 35 tokens
with the corpus laid out as ``batch_size`` parallel streams and the hidden state carried across
batches; plain SGD by hand (``p -= lr * grad``) after clipping the gradient norm to 0.25; lr
divided by 4 after an epoch whose validation loss did not improve. An epoch is Wikitext-2's
2 088 628 training tokens. The predecessor passes its examples defaults (lr 0.01, batch 32), not
main.py's (lr 20, batch 20); they are this workload's defaults too. Test loss and perplexity are
on Wikitext-2's 245 569 test tokens (scaled with ``--scale``), evaluation batch 10.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.data import EVAL_SEED, MarkovText, scaled_count
from pytest_gpu_pairs.workloads.realdata import data_root, load_wikitext2
from pytest_gpu_pairs.workloads.train import Workload

VOCAB, BPTT, CLIP, EVAL_BATCH = 33278, 35, 0.25, 10
VALID_TOKENS, TEST_TOKENS, EVAL_FLOOR = 217646, 245569, 700


class RNNModel(nn.Module):
    def __init__(self, ntoken: int, ninp: int = 200, nhid: int = 200, nlayers: int = 2, dropout: float = 0.2):
        super().__init__()
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch: int, device):
        zeros = torch.zeros(self.nlayers, batch, self.nhid, device=device)
        return zeros, zeros.clone()


def batchify(ids: torch.Tensor, batch: int) -> torch.Tensor:
    rows = ids.numel() // batch
    return ids[:rows * batch].view(batch, -1).t().contiguous()


class WordLM(Workload):
    eval_every_epoch = True

    def build_data(self):
        root = data_root()
        found = load_wikitext2(root) if root else None
        self.vocab = VOCAB
        if found is None:
            return MarkovText(VOCAB, self.device)
        self.data_kind = "real"
        train, valid, test, self.vocab = found
        train, valid, test = (torch.as_tensor(a, device=self.device) for a in (train, valid, test))
        return {"train": batchify(train, self.batch_size), "valid": batchify(valid, EVAL_BATCH),
                "test": batchify(test, EVAL_BATCH)}

    def build_model(self):
        self.lr = float(self.hp["learning_rate"])
        self.best_val = math.inf
        return RNNModel(self.vocab)

    def build_optimizer(self):
        return None

    def checkpoint_state(self):
        """The predecessor's main.py saves the model alone: its SGD is hand-written, with no state."""
        return {"model": self.model.state_dict()}

    def batches(self):
        if self.data_kind == "real":
            return self._real_batches()
        return self._generated_batches()

    def _real_batches(self):
        train = self.data["train"]
        while True:
            self.hidden = self.model.init_hidden(self.batch_size, self.device)
            for i in range(0, train.size(0) - 1, BPTT):
                length = min(BPTT, train.size(0) - 1 - i)
                yield train[i:i + length], train[i + 1:i + 1 + length]

    def _generated_batches(self):
        generator = torch.Generator(device=self.device).manual_seed(int(self.hp["seed"]))
        current = self.data.start(self.batch_size, generator)
        self.hidden = self.model.init_hidden(self.batch_size, self.device)
        while True:
            tokens = self.data.continue_streams(current, BPTT, generator)
            current = tokens[-1]
            yield tokens[:-1], tokens[1:]

    def train_step(self, batch):
        self.model.train()
        data, targets = batch
        self.hidden = tuple(h.detach() for h in self.hidden)
        self.model.zero_grad(set_to_none=True)
        output, self.hidden = self.model(data, self.hidden)
        loss = F.nll_loss(output, targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        with torch.no_grad():
            for p in self.model.parameters():
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr)
        return loss

    def _eval_tokens(self, split: str, full: int) -> torch.Tensor:
        tokens = scaled_count(full, self.scale, EVAL_FLOOR)
        if self.data_kind == "real":
            return self.data[split][:max(2, tokens // EVAL_BATCH)]
        generator = torch.Generator(device=self.device).manual_seed(EVAL_SEED + (split == "test"))
        start = self.data.start(EVAL_BATCH, generator)
        return self.data.continue_streams(start, tokens // EVAL_BATCH, generator)

    @torch.no_grad()
    def _loss_on(self, source: torch.Tensor) -> float:
        self.model.eval()
        hidden = self.model.init_hidden(EVAL_BATCH, self.device)
        total, count = 0.0, 0
        for i in range(0, source.size(0) - 1, BPTT):
            length = min(BPTT, source.size(0) - 1 - i)
            output, hidden = self.model(source[i:i + length], hidden)
            total += F.nll_loss(output, source[i + 1:i + 1 + length].reshape(-1), reduction="sum").item()
            count += length * EVAL_BATCH
        return total / max(1, count)

    def end_epoch(self):
        val = self._loss_on(self._eval_tokens("valid", VALID_TOKENS))
        if val < self.best_val:
            self.best_val = val
        else:
            self.lr /= 4.0

    def evaluate(self):
        loss = self._loss_on(self._eval_tokens("test", TEST_TOKENS))
        return {"test_loss": loss, "test_perplexity": math.exp(min(loss, 50.0))}


def make(info, hp, device, scale=1.0):
    return WordLM(info, hp, device, scale)
