"""pytorch/examples siamese_network: a ResNet-18 twin network on pairs of MNIST digits.

As in main.py: torchvision's ResNet-18 with a 1-channel first convolution and its fc removed
embeds each image (512 features); the two embeddings are concatenated into Linear(1024, 256),
ReLU, Linear(256, 1) and a sigmoid that says whether the digits match; BCE loss, Adadelta with a
0.7 step decay per epoch; half the pairs match (APP_MATCHER), an epoch is MNIST's 60 000 images,
the test set 10 000 pairs. 11.43 M parameters. Test accuracy counts outputs above 0.5 as "same".
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.backbones import resnet18
from pytest_gpu_pairs.workloads.data import ImagePairs, scaled_count
from pytest_gpu_pairs.workloads.mnist import mnist_source
from pytest_gpu_pairs.workloads.train import Workload

TEST_PAIRS, EVAL_FLOOR = 10000, 200


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        resnet = resnet18(in_channels=1)
        self.resnet = nn.Sequential(*list(resnet.children())[:-1])
        self.fc = nn.Sequential(nn.Linear(512 * 2, 256), nn.ReLU(inplace=True), nn.Linear(256, 1))
        for m in self.fc:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                m.bias.data.fill_(0.01)

    def forward_once(self, x):
        return self.resnet(x).flatten(1)

    def forward(self, x1, x2):
        out = self.fc(torch.cat((self.forward_once(x1), self.forward_once(x2)), 1))
        return torch.sigmoid(out).squeeze(1)


class Siamese(Workload):
    def build_data(self):
        source, self.data_kind = mnist_source(self.device)
        return ImagePairs(source)

    def build_model(self):
        return SiameseNetwork()

    def build_optimizer(self):
        return torch.optim.Adadelta(self.model.parameters(), lr=float(self.hp["learning_rate"]))

    def build_scheduler(self):
        return torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.7)

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def loss(self, batch):
        x1, x2, target = batch
        return F.binary_cross_entropy(self.model(x1, x2), target)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        x1, x2, target = self.data.fixed_set(scaled_count(TEST_PAIRS, self.scale, EVAL_FLOOR))
        loss, correct = 0.0, 0
        for a, b, t in zip(x1.split(500), x2.split(500), target.split(500)):
            out = self.model(a, b)
            loss += F.binary_cross_entropy(out, t, reduction="sum").item()
            correct += ((out > 0.5).float() == t).sum().item()
        return {"test_accuracy": correct / len(target), "test_loss": loss / len(target)}


def make(info, hp, device, scale=1.0):
    return Siamese(info, hp, device, scale)
