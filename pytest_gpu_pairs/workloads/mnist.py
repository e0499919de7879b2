"""The pytorch/examples MNIST family: ``mnist`` (CNN), ``mnist_rnn`` (LSTM), ``mnist_ff`` (Forward-Forward).

Architectures, optimisers and schedules follow pytorch/examples (mnist/main.py,
mnist_rnn/main.py, mnist_forward_forward/main.py): Adadelta with a 0.7 step decay per epoch for
the CNN and the LSTM; Forward-Forward layers each with their own Adam, trained on the goodness
loss with threshold 2, negatives made by overlaying shuffled labels, prediction by the label of
highest summed goodness. The predecessor trains Forward-Forward in mini-batches of its batch_size over
the examples' 50 000-image training split; the predecessor's learning rate (0.01) applies to all three.
Test metrics are on MNIST's 10 000 test images (scaled with ``--scale``), on real MNIST when it
is under the data root.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.data import ImageDifficulty, PrototypeImages, scaled_count
from pytest_gpu_pairs.workloads.realdata import data_root, load_mnist
from pytest_gpu_pairs.workloads.sources import ArrayImages
from pytest_gpu_pairs.workloads.train import Workload

TEST_IMAGES = 10000
EVAL_FLOOR = 200
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
DIFFICULTY = ImageDifficulty(signal=0.5, clutter=1.0, noise=1.0, shift=3, cell=4)


def mnist_source(device: torch.device):
    """Real MNIST when it is under the data root, else generated digits-shaped classes."""
    root = data_root()
    found = load_mnist(root) if root else None
    if found is None:
        return PrototypeImages((1, 28, 28), 10, device, DIFFICULTY), "generated"
    return ArrayImages(*found, MNIST_MEAN, MNIST_STD, device), "real"


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
        source, self.data_kind = mnist_source(self.device)
        return source

    def eval_size(self) -> int:
        return scaled_count(TEST_IMAGES, self.scale, EVAL_FLOOR)

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def loss(self, batch):
        x, y = batch
        return F.nll_loss(self.model(x), y)

    def build_optimizer(self):
        return torch.optim.Adadelta(self.model.parameters(), lr=float(self.hp["learning_rate"]))

    def build_scheduler(self):
        return torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.7)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        x, y = self.data.fixed_set(self.eval_size())
        total_loss, correct = 0.0, 0
        for xb, yb in zip(x.split(1000), y.split(1000)):
            out = self.model(xb)
            total_loss += F.nll_loss(out, yb, reduction="sum").item()
            correct += (out.argmax(dim=1) == yb).sum().item()
        return {"test_accuracy": correct / len(y), "test_loss": total_loss / len(y)}


class Mnist(_Classifier):
    def build_model(self):
        return MnistCnn()


class MnistRnn(_Classifier):
    def build_model(self):
        return MnistLstm()


class FFLayer(nn.Linear):
    """One Forward-Forward layer with its own optimiser, trained alone so that positive data
    has goodness (mean squared activation) above the threshold and negative data below it."""

    threshold = 2.0

    def forward(self, x):
        direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return F.relu(super().forward(direction))

    def local_loss(self, positive, negative):
        good_pos = self(positive).pow(2).mean(1)
        good_neg = self(negative).pow(2).mean(1)
        return torch.log(1 + torch.exp(torch.cat([-good_pos + self.threshold, good_neg - self.threshold]))).mean()


def overlay_label(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Forward-Forward's input: the image flattened, its first 10 pixels replaced by a one-hot
    label at the batch's maximum value (examples' overlay_y_on_x)."""
    flat = x.flatten(1).clone()
    flat[:, :10] = 0.0
    flat[torch.arange(len(flat), device=flat.device), labels] = x.max()
    return flat


class MnistFF(_Classifier):
    def build_model(self):
        return nn.ModuleList([FFLayer(784, 500), FFLayer(500, 500)])

    def build_optimizer(self):
        self.layer_optimizers = [torch.optim.Adam(layer.parameters(), lr=float(self.hp["learning_rate"]))
                                 for layer in self.model]
        return self.layer_optimizers[0]

    def checkpoint_state(self):
        return {"model": self.model.state_dict(),
                "optimizers": [optimizer.state_dict() for optimizer in self.layer_optimizers]}

    def build_scheduler(self):
        return None

    def train_step(self, batch):
        x, y = batch
        shuffled = y[torch.randperm(len(y), device=y.device)]
        positive, negative = overlay_label(x, y), overlay_label(x, shuffled)
        total = torch.zeros((), device=x.device)
        for layer, optimizer in zip(self.model, self.layer_optimizers):
            loss = layer.local_loss(positive, negative)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total = total + loss.detach()
            with torch.no_grad():
                positive, negative = layer(positive), layer(negative)
        return total

    @torch.no_grad()
    def predict(self, x):
        goodness = []
        for label in range(10):
            h = overlay_label(x, torch.full((len(x),), label, device=x.device, dtype=torch.long))
            score = torch.zeros(len(x), device=x.device)
            for layer in self.model:
                h = layer(h)
                score = score + h.pow(2).mean(1)
            goodness.append(score)
        return torch.stack(goodness, 1).argmax(1)

    def _error(self, x, y) -> float:
        wrong = sum((self.predict(xb) != yb).sum().item() for xb, yb in zip(x.split(1000), y.split(1000)))
        return wrong / len(y)

    @torch.no_grad()
    def evaluate(self):
        n = self.eval_size()
        x, y = self.data.fixed_set(n)
        test_error = self._error(x, y)
        xt, yt = self.data.sample(n, torch.Generator(device=self.device).manual_seed(7))
        return {"test_accuracy": 1.0 - test_error, "test_error": test_error,
                "train_error": self._error(xt, yt)}


_KINDS = {"mnist": Mnist, "mnist_rnn": MnistRnn, "mnist_ff": MnistFF}


def make(info, hp, device, scale=1.0):
    return _KINDS[info.name](info, hp, device, scale)
