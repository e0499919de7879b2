"""CIFAR-10 ResNets of akamaster/pytorch_resnet_cifar10 (He et al. 2016, option A shortcuts).

resnet20/32/44/56 have 3 stages of n = 3/5/7/9 basic blocks (16, 32, 64 channels), about
0.27/0.46/0.66/0.85 M parameters; SGD with momentum 0.9, weight decay 1e-4, and the lr
dropped tenfold at epochs 100 and 150, as in the original trainer.py; batch 128 over CIFAR-10's
50 000 training images, the 10 000 test images evaluated after every epoch (test accuracy of
the last epoch and the best one, the predecessor's two metrics, as fractions where it printed percents). On real CIFAR-10 (under the data root)
training batches get trainer.py's augmentation: 4-pixel padded random crops and mirroring.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.data import ImageDifficulty, PrototypeImages, scaled_count
from pytest_gpu_pairs.workloads.realdata import data_root, load_cifar10
from pytest_gpu_pairs.workloads.sources import ArrayImages
from pytest_gpu_pairs.workloads.train import Workload

DEPTHS = {"resnet20": 3, "resnet32": 5, "resnet44": 7, "resnet56": 9}
TEST_IMAGES, EVAL_FLOOR = 10000, 200
CIFAR_MEAN, CIFAR_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DIFFICULTY = ImageDifficulty(signal=0.45, clutter=1.0, noise=1.0, shift=4, cell=4)


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad = planes // 4 if stride != 1 or in_planes != planes else None

    def shortcut(self, x):
        if self.pad is None:
            return x
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, blocks: int, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, in_planes = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(blocks):
                layers.append(BasicBlock(in_planes, planes, stride if i == 0 else 1))
                in_planes = planes
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(64, classes)
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight)

    def forward(self, x):
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


class CifarResNetWorkload(Workload):
    eval_every_epoch = True

    def build_data(self):
        root = data_root()
        found = load_cifar10(root) if root else None
        if found is None:
            return PrototypeImages(self.info.input_shape, 10, self.device, DIFFICULTY)
        self.data_kind = "real"
        return ArrayImages(*found, CIFAR_MEAN, CIFAR_STD, self.device, flip=True, pad_crop=4)

    def build_model(self):
        return CifarResNet(DEPTHS[self.info.name])

    def build_optimizer(self):
        return torch.optim.SGD(self.model.parameters(), lr=float(self.hp["learning_rate"]), momentum=0.9,
                               weight_decay=float(self.hp["weight_decay"]))

    def build_scheduler(self):
        return torch.optim.lr_scheduler.MultiStepLR(self.optimizer, milestones=[100, 150])

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def loss(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        x, y = self.data.fixed_set(scaled_count(TEST_IMAGES, self.scale, EVAL_FLOOR))
        correct = sum((self.model(xb).argmax(1) == yb).sum().item() for xb, yb in zip(x.split(500), y.split(500)))
        return {"test_accuracy": correct / len(y)}

    def final_metrics(self):
        history = self.history or [self.evaluate()]
        return {"test_accuracy": history[-1]["test_accuracy"],
                "best_val_accuracy": max(h["test_accuracy"] for h in history)}


def make(info, hp, device, scale=1.0):
    return CifarResNetWorkload(info, hp, device, scale)
