"""VulBERTa (ICL-ml4csec/VulBERTa) fine-tuned for vulnerability detection on D2A functions.

``vulberta_mlp`` is RoBERTa-base for sequence classification (124.8 M parameters, VulBERTa's
config) as the predecessor's train_vulberta.py trains it with transformers' Trainer: sequences of 1 024
BPE tokens (padding 1), batch 2, fp16 mixed precision on CUDA (autocast + GradScaler; fp32 on the
CPU), AdamW with a linear decay to 0, gradient norm clipped to 1, class-weighted cross-entropy
('balanced' weights), evaluation on the D2A dev split after every epoch. It starts from random
weights where the predecessor starts from the pre-trained VulBERTa: same compute and memory, no download.

``vulberta_cnn`` is the repository's VulBERTa-CNN notebook model: VulBERTa's 50 000 x 768 token
embedding, frozen, under three 1-D convolutions (200 filters of widths 3, 4, 5), max-pooled over
time, dropout 0.5, then 600-256-128-2 fully connected layers; Adam at lr 5e-4, batch 128, 20
epochs, seed 1234, class-weighted cross-entropy. The predecessor's train.sh never trained it (it
printed "not yet implemented" and exited in seconds), so its defaults are the notebook's.

Data: D2A's function-level split has 4 643 training and 596 dev functions; the generated
sequences (``data.MotifSequences``) are vulnerable when they contain one of a few token motifs,
with decoys in the safe ones. Metrics: eval_loss and final_training_loss (the predecessor's), plus
accuracy, precision, recall and F1 on the dev split.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.data import MotifSequences, scaled_count
from pytest_gpu_pairs.workloads.roberta import RobertaConfig, RobertaForSequenceClassification
from pytest_gpu_pairs.workloads.scores import binary_scores
from pytest_gpu_pairs.workloads.train import Workload, total_steps

SEQUENCE, VOCAB, PAD = 1024, 50000, 1
DEV_FUNCTIONS = 596


class VulBertaCnn(nn.Module):
    def __init__(self, vocab: int = VOCAB, dim: int = 768):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.embed.weight.requires_grad_(False)
        self.conv1 = nn.Conv1d(dim, 200, kernel_size=3)
        self.conv2 = nn.Conv1d(dim, 200, kernel_size=4)
        self.conv3 = nn.Conv1d(dim, 200, kernel_size=5)
        self.dropout = nn.Dropout(0.5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(600, 256), nn.Linear(256, 128), nn.Linear(128, 2)

    def forward(self, tokens, attention_mask=None):
        x = self.embed(tokens).permute(0, 2, 1)
        pooled = [F.relu(conv(x)).amax(dim=2) for conv in (self.conv1, self.conv2, self.conv3)]
        x = self.dropout(torch.cat(pooled, dim=1))
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class VulBerta(Workload):
    eval_every_epoch = True

    @property
    def is_mlp(self) -> bool:
        return self.info.name == "vulberta_mlp"

    @property
    def amp(self) -> bool:
        return self.is_mlp and self.device.type == "cuda"

    def build_data(self):
        data = MotifSequences(SEQUENCE, VOCAB, self.device, pad_id=PAD)
        positive = data.positive
        self.class_weights = torch.tensor([0.5 / (1 - positive), 0.5 / positive], device=self.device)
        self.train_losses: list[torch.Tensor] = []
        return data

    def build_model(self):
        return RobertaForSequenceClassification(RobertaConfig()) if self.is_mlp else VulBertaCnn()

    def build_optimizer(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        lr = float(self.hp["learning_rate"])
        if self.is_mlp:
            self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
            return torch.optim.AdamW(params, lr=lr, weight_decay=float(self.hp["weight_decay"]), eps=1e-8)
        return torch.optim.Adam(params, lr=lr, weight_decay=float(self.hp["weight_decay"]))

    def build_scheduler(self):
        self.scheduled_steps = total_steps(float(self.hp["epochs"]), self.steps_per_epoch(), self.scale)
        if not self.is_mlp:
            return None
        scheduled = self.scheduled_steps
        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: max(0.0, 1.0 - step / scheduled))

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.float16) if self.amp else contextlib.nullcontext()

    def _logits(self, tokens, mask):
        with self._autocast():
            return self.model(tokens, mask)

    def train_step(self, batch):
        self.model.train()
        tokens, mask, labels = batch
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self._logits(tokens, mask).float(), labels, weight=self.class_weights)
        if self.is_mlp:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            if self.scheduler is not None:
                self.scheduler.step()
        else:
            loss.backward()
            self.optimizer.step()
        self.train_losses.append(loss.detach())
        return loss

    def end_epoch(self):
        self.history.append(self.evaluate())

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        floor = 1 if self.is_mlp else 64
        tokens, mask, labels = self.data.fixed_set(scaled_count(DEV_FUNCTIONS, self.scale, floor))
        step = 8 if self.is_mlp else 128
        losses, predictions = [], []
        for t, m, y in zip(tokens.split(step), mask.split(step), labels.split(step)):
            logits = self._logits(t, m).float()
            losses.append(F.cross_entropy(logits, y, weight=self.class_weights, reduction="sum"))
            predictions.append(logits.argmax(1))
        weights = self.class_weights[labels].sum()
        return {"eval_loss": (torch.stack(losses).sum() / weights).item(),
                **binary_scores(torch.cat(predictions), labels)}

    def final_metrics(self):
        metrics = dict(self.history[-1]) if self.history else self.evaluate()
        if self.train_losses:
            metrics["final_training_loss"] = torch.stack(self.train_losses).float().mean().item()
        return metrics


def make(info, hp, device, scale=1.0):
    return VulBerta(info, hp, device, scale)
