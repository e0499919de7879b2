"""The pytorch/examples MNIST family: ``mnist`` (CNN), ``mnist_rnn`` (LSTM), ``mnist_ff`` (Forward-Forward).

Architectures and optimisers follow the examples repository (Adadelta with a 0.7 step decay per
epoch for the CNN and the LSTM; per-layer Adam with the Forward-Forward goodness loss for ff).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import PrototypeImages
from .train import Workload

EVAL_SAMPLES = 2000


class MnistCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, 1), nn.Conv2d(32, 64, 3, 1)
        self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return F.log_softmax(self.fc2(x), dim=1)


class MnistLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(64)
        self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        output, _ = self.rnn(x.reshape(-1, 28, 28))
        x = self.dropout1(self.batchnorm(output[:, -1, :]))
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


class _Classifier(Workload):
    def build_data(self):
        return PrototypeImages(self.info.input_shape, 10, self.device)

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def loss(self, batch):
        x, y = batch
        return F.nll_loss(self.model(x), y)

    def build_scheduler(self):
        return torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.7)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        x, y = self.data.fixed_set(EVAL_SAMPLES)
        total_loss, correct = 0.0, 0
        for xb, yb in zip(x.split(500), y.split(500)):
            out = self.model(xb)
            total_loss += F.nll_loss(out, yb, reduction="sum").item()
            correct += (out.argmax(dim=1) == yb).sum().item()
        return {"test_accuracy": 100.0 * correct / len(y), "test_loss": total_loss / len(y)}


class Mnist(_Classifier):
    def build_model(self):
        return MnistCnn()

    def build_optimizer(self):
        return torch.optim.Adadelta(self.model.parameters(), lr=float(self.hp["learning_rate"]))


class MnistRnn(_Classifier):
    def build_model(self):
        return MnistLstm()

    def build_optimizer(self):
        return torch.optim.Adadelta(self.model.parameters(), lr=float(self.hp["learning_rate"]))


class FFLayer(nn.Linear):
    """One Forward-Forward layer: trained alone to give positive data high goodness."""

    threshold = 2.0

    def forward(self, x):
        x = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return F.relu(super().forward(x))

    def local_loss(self, positive, negative):
        good_pos = self(positive).pow(2).mean(1)
        good_neg = self(negative).pow(2).mean(1)
        return torch.log1p(torch.exp(torch.cat([self.threshold - good_pos, good_neg - self.threshold]))).mean()


def overlay_label(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Forward-Forward's input: the first 10 pixels hold the one-hot label."""
    flat = x.flatten(1).clone()
    flat[:, :10] = 0
    flat[torch.arange(len(flat)), labels] = flat.max()
    return flat


class MnistFF(_Classifier):
    def build_model(self):
        return nn.Sequential(FFLayer(784, 500), FFLayer(500, 500))

    def build_optimizer(self):
        return torch.optim.Adam(self.model.parameters(), lr=float(self.hp["learning_rate"]))

    def build_scheduler(self):
        return None

    def train_step(self, batch):
        x, y = batch
        wrong = (y + torch.randint(1, 10, y.shape, device=y.device)) % 10
        positive, negative = overlay_label(x, y), overlay_label(x, wrong)
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for layer in self.model:
            loss = layer.local_loss(positive, negative)
            loss.backward()
            total = total + loss.detach()
            positive, negative = layer(positive).detach(), layer(negative).detach()
        self.optimizer.step()
        return total

    @torch.no_grad()
    def predict(self, x):
        goodness = []
        for label in range(10):
            h = overlay_label(x, torch.full((len(x),), label, device=x.device))
            score = 0
            for layer in self.model:
                h = layer(h)
                score = score + h.pow(2).mean(1)
            goodness.append(score)
        return torch.stack(goodness, 1).argmax(1)

    @torch.no_grad()
    def evaluate(self):
        x, y = self.data.fixed_set(EVAL_SAMPLES)
        test_error = (self.predict(x) != y).float().mean().item()
        xt, yt = self.data.sample(EVAL_SAMPLES, torch.Generator(device=self.device).manual_seed(7))
        train_error = (self.predict(xt) != yt).float().mean().item()
        return {"test_accuracy": 100.0 * (1 - test_error), "test_error": test_error, "train_error": train_error}


_KINDS = {"mnist": Mnist, "mnist_rnn": MnistRnn, "mnist_ff": MnistFF}


def make(info, hp, device):
    return _KINDS[info.name](info, hp, device)
