"""MRT-OAST: a Multiple Representation Transformer comparing two programs' optimised ASTs
(code clone detection on OJClone), as the predecessor's train.sh runs main_batch.py.

Hyperparameters of train.sh/main_batch.py: sequences of 256 OAST tokens (OJClone's OAST
dictionary has 112 words), 2 transformer layers of width 128 with 8 heads and feed-forward 512,
output features 512, dropout 0.2, batch 64, BCE loss, Adam whose lr warms up linearly over the
first fifth of the steps to ``learning_rate`` and then decays linearly to a tenth of it. OJClone
has 40 000 training, 5 000 validation and 5 000 test pairs; the predecessor tests at threshold 0.9
(accuracy, precision, recall, F1 on the test pairs). Its validation pass every 1 750 steps is not
run here. The test also reports the scores' ROC AUC: a non-clone's score settles near 0.5
(orthogonal features) while a clone's climbs towards 1 slowly, so for the first few thousand
steps at the default learning rate no score crosses 0.9 and the thresholded figures stay at
chance while the AUC already shows how far the model has learned (an 8-epoch run at lr 1e-4 on an
H100: AUC 0.70 after its first epoch, 0.87 after its fourth, 0.90 at its end, where accuracy at
0.9 first leaves chance, at 0.53).

The repository's network (nnet/btransform.py) is not public in the predecessor's copy; this one is a
siamese transformer of those sizes: shared token and position embeddings, the encoder, mean- and
max-pooled states projected to 512 features, cosine similarity mapped to [0, 1]. Generated
pairs (``data.ClonePairs``) are clones when both programs derive from one of 104 templates
(OJClone's 104 problems) under token substitutions and shifts.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.data import ClonePairs, scaled_count
from pytest_gpu_pairs.workloads.scores import binary_scores, roc_auc
from pytest_gpu_pairs.workloads.train import Workload, total_steps

SEQUENCE, VOCAB = 256, 113
D_MODEL, D_FF, HEADS, LAYERS, OUTPUT_DIM = 128, 512, 8, 2, 512
TEST_PAIRS, VALID_PAIRS, VALID_STEP = 5000, 5000, 1750
TEST_THRESHOLD, VALID_THRESHOLD = 0.9, 0.8


class MrtEncoder(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, D_MODEL, padding_idx=0)
        self.positions = nn.Embedding(SEQUENCE, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.project = nn.Linear(2 * D_MODEL, OUTPUT_DIM)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        states = self.encoder(self.tokens(tokens) + self.positions(positions))
        return self.project(torch.cat([states.mean(1), states.amax(1)], dim=1))


class MrtSiamese(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.encoder = MrtEncoder(dropout)

    def forward(self, a, b):
        similarity = F.cosine_similarity(self.encoder(a), self.encoder(b), dim=1)
        return ((similarity + 1) / 2).clamp(1e-6, 1 - 1e-6)


class MrtOast(Workload):
    def build_data(self):
        return ClonePairs(SEQUENCE, VOCAB, self.device)

    def build_model(self):
        return MrtSiamese(float(self.hp["dropout"]))

    def build_optimizer(self):
        return torch.optim.Adam(self.model.parameters(), lr=1.0, weight_decay=float(self.hp["weight_decay"]))

    def build_scheduler(self):
        total = total_steps(float(self.hp["epochs"]), self.steps_per_epoch(), self.scale)
        warmup = self.steps_per_epoch() * self.scale * float(self.hp["epochs"]) / 5
        target = float(self.hp["learning_rate"])
        final = target / 10

        def lr_at(step: int) -> float:
            if step < warmup:
                return target * step / warmup
            return max(final, target - (target - final) * (step - warmup) / max(1.0, total - warmup))

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_at)

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def train_step(self, batch):
        a, b, target = batch
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.binary_cross_entropy(self.model(a, b), target)
        loss.backward()
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return loss

    def end_epoch(self):
        pass

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        a, b, target = self.data.fixed_set(scaled_count(TEST_PAIRS, self.scale, 200))
        scores = torch.cat([self.model(x, y) for x, y in zip(a.split(256), b.split(256))])
        return {**binary_scores(scores > TEST_THRESHOLD, target), "auc": roc_auc(scores, target)}


def make(info, hp, device, scale=1.0):
    return MrtOast(info, hp, device, scale)
