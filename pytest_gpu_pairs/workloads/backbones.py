"""ImageNet backbones in plain torch: ResNet-18/50 and DenseNet-121 as torchvision builds them,
HRNet-W18 as timm's ``hrnet_w18`` (classification variant, with its incre/downsample/final
layers producing 2048 channels). torchvision does not install beside the CPU torch used here and
timm needs torchvision, so the architectures are written out; layer for layer they match the
published models: ResNet-18 11.69 M, ResNet-50 25.56 M, DenseNet-121 7.98 M, HRNet-W18 21.3 M
parameters with their 1000-class heads (``tests/unit/workloads/test_workloads.py`` checks the counts). Weights
start random (the re-ID baselines start from ImageNet weights; compute and memory do not depend
on the values).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_conv_bn(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


# --- ResNet (torchvision.models.resnet) ------------------------------------------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


def _downsample(inplanes: int, outplanes: int, stride: int) -> nn.Module | None:
    if stride == 1 and inplanes == outplanes:
        return None
    return nn.Sequential(nn.Conv2d(inplanes, outplanes, 1, stride, bias=False), nn.BatchNorm2d(outplanes))


class ResNet(nn.Module):
    def __init__(self, block, layers: list[int], num_classes: int = 1000, in_channels: int = 3):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(block, 64, layers[0], 1)
        self.layer2 = self._layer(block, 128, layers[1], 2)
        self.layer3 = self._layer(block, 256, layers[2], 2)
        self.layer4 = self._layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        _init_conv_bn(self)

    def _layer(self, block, planes: int, blocks: int, stride: int) -> nn.Sequential:
        layers = [block(self.inplanes, planes, stride, _downsample(self.inplanes, planes * block.expansion, stride))]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def features(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def resnet18(**kwargs) -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


def resnet50(**kwargs) -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3], **kwargs)


# --- DenseNet-121 (torchvision.models.densenet) ----------------------------------------------

class _DenseLayer(nn.Module):
    def __init__(self, in_features: int, growth: int = 32, bn_size: int = 4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_features)
        self.conv1 = nn.Conv2d(in_features, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class _DenseBlock(nn.ModuleDict):
    def __init__(self, layers: int, in_features: int, growth: int = 32):
        super().__init__()
        for i in range(layers):
            self[f"denselayer{i + 1}"] = _DenseLayer(in_features + i * growth, growth)

    def forward(self, x):
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(in_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(in_features, out_features, 1, bias=False)
        self.pool = nn.AvgPool2d(2, 2)


class DenseNet121(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers = [("conv0", nn.Conv2d(3, 64, 7, 2, 3, bias=False)), ("norm0", nn.BatchNorm2d(64)),
                  ("relu0", nn.ReLU(inplace=True)), ("pool0", nn.MaxPool2d(3, 2, 1))]
        features = 64
        for i, count in enumerate((6, 12, 24, 16)):
            layers.append((f"denseblock{i + 1}", _DenseBlock(count, features)))
            features += count * 32
            if i != 3:
                layers.append((f"transition{i + 1}", _Transition(features, features // 2)))
                features //= 2
        layers.append(("norm5", nn.BatchNorm2d(features)))
        self.features = nn.Sequential(OrderedDict(layers))
        self.classifier = nn.Linear(features, num_classes)
        _init_conv_bn(self)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(F.relu(self.features(x)), 1)
        return self.classifier(torch.flatten(x, 1))


# --- HRNet-W18 (timm hrnet_w18, classification head) -----------------------------------------

def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, relu: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def _cells(row: nn.Module) -> nn.ModuleList:
    """One row of a fuse layer: a ModuleList (the outer ModuleList hands its items out as Module)."""
    return cast(nn.ModuleList, row)


class _HrModule(nn.Module):
    """Parallel branches of 4 basic blocks each, then full exchange between resolutions."""

    def __init__(self, channels: list[int]):
        super().__init__()
        self.branches = nn.ModuleList(nn.Sequential(*[BasicBlock(c, c) for _ in range(4)]) for c in channels)
        self.fuse = nn.ModuleList()
        for i, ci in enumerate(channels):
            row = nn.ModuleList()
            for j, cj in enumerate(channels):
                if j > i:
                    row.append(nn.Sequential(nn.Conv2d(cj, ci, 1, bias=False), nn.BatchNorm2d(ci),
                                             nn.Upsample(scale_factor=2 ** (j - i), mode="nearest")))
                elif j == i:
                    row.append(nn.Identity())
                else:
                    steps = [_conv_bn(cj, cj, 3, 2) for _ in range(i - j - 1)]
                    steps.append(_conv_bn(cj, ci, 3, 2, relu=False))
                    row.append(nn.Sequential(*steps))
            self.fuse.append(row)
        self.relu = nn.ReLU()

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        xs = [branch(x) for branch, x in zip(self.branches, xs)]
        out = []
        for row in map(_cells, self.fuse):
            y = row[0](xs[0])
            for j in range(1, len(xs)):
                y = y + row[j](xs[j])
            out.append(self.relu(y))
        return out


class HRNetW18(nn.Module):
    """HRNet-W18-C: stem, a bottleneck stage, then 1/4/3 modules of 2/3/4 branches (18, 36, 72,
    144 channels), and the classification head that turns the branches into 2048 channels."""

    widths = (18, 36, 72, 144)

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 3, 2), _conv_bn(64, 64, 3, 2))
        self.layer1 = nn.Sequential(*[Bottleneck(64 if i == 0 else 256, 64, 1, _downsample(64, 256, 1) if i == 0 else None)
                                      for i in range(4)])
        w = self.widths
        self.transition1 = nn.ModuleList([_conv_bn(256, w[0], 3), _conv_bn(256, w[1], 3, 2)])
        self.stage2 = nn.Sequential(_HrModule(list(w[:2])))
        self.transition2 = _conv_bn(w[1], w[2], 3, 2)
        self.stage3 = nn.Sequential(*[_HrModule(list(w[:3])) for _ in range(4)])
        self.transition3 = _conv_bn(w[2], w[3], 3, 2)
        self.stage4 = nn.Sequential(*[_HrModule(list(w)) for _ in range(3)])
        head = (32, 64, 128, 256)
        self.incre = nn.ModuleList(Bottleneck(c, h, 1, _downsample(c, h * 4, 1)) for c, h in zip(w, head))
        self.downsamp = nn.ModuleList(
            nn.Sequential(nn.Conv2d(head[i] * 4, head[i + 1] * 4, 3, 2, 1), nn.BatchNorm2d(head[i + 1] * 4),
                          nn.ReLU(inplace=True)) for i in range(3))
        self.final = nn.Sequential(nn.Conv2d(1024, 2048, 1), nn.BatchNorm2d(2048), nn.ReLU(inplace=True))
        self.classifier: nn.Module = nn.Linear(2048, num_classes)  # a re-id head replaces it with nn.Identity
        _init_conv_bn(self)

    def forward_features(self, x):
        x = self.layer1(self.stem(x))
        xs = [t(x) for t in self.transition1]
        xs = self.stage2(xs)
        xs = self.stage3(xs + [self.transition2(xs[-1])])
        xs = self.stage4(xs + [self.transition3(xs[-1])])
        y = self.incre[0](xs[0])
        for i, down in enumerate(self.downsamp):
            y = self.incre[i + 1](xs[i + 1]) + down(y)
        return self.final(y)

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.forward_features(x), 1), 1))
