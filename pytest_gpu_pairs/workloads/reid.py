"""Person re-ID baselines of layumi/Person_reID_baseline_pytorch as the predecessor trains them:
``densenet121`` (ft_net_dense), ``hrnet18`` (ft_net_hr) and ``pcb`` (PCB on ResNet-50).

Model heads, optimiser and schedule follow the repository's model.py/train.py: a ClassBlock
(Linear 512, BatchNorm, Dropout, classifier) over 751 Market-1501 identities; PCB's six part
classifiers (Linear 256) over a ResNet-50 whose last stride is 1, pooled to 6 horizontal parts,
with dropout fixed at 0.5 as in the original (its ``--droprate`` does not reach PCB); SGD with
momentum 0.9, Nesterov, weight decay 5e-4, lr x0.1 for the backbone, lr decayed tenfold at 2/3 of
the epochs; cudnn.benchmark on. Inputs are 3x256x128 (PCB 3x384x192). The ImageNet heads that
the original leaves in place (DenseNet's classifier, ResNet-50's fc) stay, unused, as there;
HRNet's is removed, as there. An epoch is Market-1501's ``train_all`` (12 936 images, batches
of the predecessor's train.sh: 24 for densenet121/hrnet18, 32 for pcb, last partial batch dropped).

Evaluation is the repository's test.py + evaluate_gpu.py: features of each image and of its
mirror summed and L2-normalised (PCB: 6 part features, each normalised, scaled by 1/sqrt(6)),
gallery ranked by cosine similarity, same-identity same-camera and identity -1 images ignored,
Rank@1/Rank@5/mAP over queries with at least one true match. The generated query/gallery split
uses identities never seen in training (Market-1501's 750 test identities; 3 368 queries and
15 913 gallery images at scale 1). The predecessor's train.sh forces lr 0.02 for pcb whatever ``--lr``
says; the predecessor's pcb results are therefore at lr 0.02, which is this workload's default too.
The per-epoch 'val' pass of train.py (751 images, monitoring only) is not run.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads.backbones import DenseNet121, HRNetW18, resnet50
from pytest_gpu_pairs.workloads.data import ReidIdentities, scaled_count
from pytest_gpu_pairs.workloads.realdata import data_root, load_market
from pytest_gpu_pairs.workloads.sources import shuffled_batches
from pytest_gpu_pairs.workloads.train import Workload

IDENTITIES = 751
TEST_IDENTITIES, QUERIES, GALLERY = 750, 3368, 15913
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def weights_init_kaiming(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.kaiming_normal_(m.weight, a=0, mode="fan_out")
        nn.init.constant_(m.bias, 0.0)
    elif isinstance(m, nn.BatchNorm1d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.constant_(m.bias, 0.0)


class ClassBlock(nn.Module):
    """|--Linear--|--bn--|--dropout--|--Linear classifier--|; ``embed`` returns the feature the
    test script uses (the classifier removed)."""

    def __init__(self, input_dim: int, classes: int, droprate: float, linear: int = 512):
        super().__init__()
        block = [nn.Linear(input_dim, linear), nn.BatchNorm1d(linear)]
        if droprate > 0:
            block.append(nn.Dropout(p=droprate))
        self.add_block = nn.Sequential(*block)
        self.add_block.apply(weights_init_kaiming)
        last = nn.Linear(linear, classes)
        self.classifier = nn.Sequential(last)
        nn.init.normal_(last.weight, std=0.001)
        nn.init.constant_(last.bias, 0.0)

    def forward(self, x):
        return self.classifier(self.add_block(x))

    def embed(self, x):
        return self.add_block(x)


class DenseReid(nn.Module):
    def __init__(self, classes: int, droprate: float):
        super().__init__()
        self.model = DenseNet121()
        self.model.features.add_module("avgpool", nn.AdaptiveAvgPool2d((1, 1)))
        self.classifier = ClassBlock(1024, classes, droprate)

    def pooled(self, x):
        return torch.flatten(self.model.features(x), 1)

    def forward(self, x):
        return self.classifier(self.pooled(x))

    def embed(self, x):
        return self.classifier.embed(self.pooled(x))


class HrReid(nn.Module):
    def __init__(self, classes: int, droprate: float):
        super().__init__()
        self.model = HRNetW18()
        self.model.classifier = nn.Identity()
        self.classifier = ClassBlock(2048, classes, droprate)

    def pooled(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(self.model.forward_features(x), 1), 1)

    def forward(self, x):
        return self.classifier(self.pooled(x))

    def embed(self, x):
        return self.classifier.embed(self.pooled(x))


def _stride_one(block: Any) -> None:
    """PCB keeps the last stage's resolution: its first block (a torchvision-style Bottleneck) strides 1."""
    block.downsample[0].stride = (1, 1)
    block.conv2.stride = (1, 1)


class PCB(nn.Module):
    parts = 6

    def __init__(self, classes: int):
        super().__init__()
        self.model = resnet50()
        _stride_one(self.model.layer4[0])
        self.avgpool = nn.AdaptiveAvgPool2d((self.parts, 1))
        self.dropout = nn.Dropout(p=0.5)
        for i in range(self.parts):
            setattr(self, f"classifier{i}", ClassBlock(2048, classes, droprate=0.5, linear=256))

    def part_features(self, x):
        return self.avgpool(self.model.features(x)).squeeze(3)

    def forward(self, x):
        parts = self.dropout(self.part_features(x))
        return [getattr(self, f"classifier{i}")(parts[:, :, i]) for i in range(self.parts)]

    def embed(self, x):
        return self.part_features(x)


def classifier_parameter_ids(model: nn.Module) -> set[int]:
    if isinstance(model, PCB):
        heads = [model.model.fc] + [getattr(model, f"classifier{i}") for i in range(PCB.parts)]
    else:
        heads = [model.classifier]
    return {id(p) for head in heads for p in head.parameters()}


def normalise_features(features: torch.Tensor) -> torch.Tensor:
    if features.dim() == 3:
        norm = features.norm(p=2, dim=1, keepdim=True) * math.sqrt(features.shape[2])
        return (features / norm).flatten(1)
    return features / features.norm(p=2, dim=1, keepdim=True)


def average_precision(ranked_good: np.ndarray, good_count: int) -> tuple[float, int]:
    """evaluate_gpu.py's compute_mAP on positions of true matches in the junk-free ranking:
    (AP, rank of the first true match)."""
    ap = 0.0
    for i, row in enumerate(ranked_good):
        d_recall = 1.0 / good_count
        precision = (i + 1) / (row + 1)
        old_precision = i / row if row != 0 else 1.0
        ap += d_recall * (old_precision + precision) / 2
    return ap, int(ranked_good[0])


def rank_and_map(qf: torch.Tensor, q_ids, q_cams, gf: torch.Tensor, g_ids, g_cams) -> dict[str, float]:
    """Rank@1, Rank@5 and mAP over valid queries, fractions (0-1) as the predecessor reports them."""
    scores = (qf @ gf.T).cpu().numpy()
    q_ids, q_cams, g_ids, g_cams = (np.asarray(a) for a in (q_ids, q_cams, g_ids, g_cams))
    cmc = np.zeros(len(g_ids))
    aps, valid = [], 0
    for q in range(len(q_ids)):
        order = np.argsort(-scores[q], kind="stable")
        same_id, same_cam = g_ids[order] == q_ids[q], g_cams[order] == q_cams[q]
        junk = (g_ids[order] == -1) | (same_id & same_cam)
        good = same_id & ~same_cam
        kept_good = good[~junk]
        if not kept_good.any():
            continue
        rows = np.flatnonzero(kept_good)
        ap, first = average_precision(rows, len(rows))
        cmc[first:] += 1
        aps.append(ap)
        valid += 1
    if valid == 0:
        return {"rank1": 0.0, "rank5": 0.0, "map": 0.0}
    cmc /= valid
    return {"rank1": float(cmc[0]), "rank5": float(cmc[min(4, len(cmc) - 1)]),
            "map": float(np.mean(aps))}


class _MarketImages:
    """Real Market-1501 arrays on the device, batched with the baseline's train transforms."""

    def __init__(self, split, device: torch.device, pcb: bool):
        self.device, self.pcb = device, pcb
        x, y, self.classes = split["train"]
        self.train_x = torch.as_tensor(x, device=device).permute(0, 3, 1, 2).contiguous()
        self.train_y = torch.as_tensor(y, device=device).long()
        self.query, self.gallery = split["query"], split["gallery"]
        self.mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)

    def normalise(self, x):
        return (x.float() / 255.0 - self.mean) / self.std

    def _augment(self, x, generator):
        if not self.pcb:
            n, _, h, w = x.shape
            padded = F.pad(x, (10, 10, 10, 10))
            dy = torch.randint(0, 21, (n,), device=x.device, generator=generator)
            dx = torch.randint(0, 21, (n,), device=x.device, generator=generator)
            rows = (torch.arange(h, device=x.device).view(1, -1) + dy.view(-1, 1)).view(n, 1, h, 1)
            cols = (torch.arange(w, device=x.device).view(1, -1) + dx.view(-1, 1)).view(n, 1, 1, w)
            x = padded[torch.arange(n, device=x.device).view(-1, 1, 1, 1),
                       torch.arange(3, device=x.device).view(1, -1, 1, 1), rows, cols]
        mirror = torch.rand(len(x), device=x.device, generator=generator) < 0.5
        return torch.where(mirror.view(-1, 1, 1, 1), x.flip(3), x)

    def stream(self, batch_size: int, seed: int):
        return shuffled_batches(self.train_x, self.train_y, batch_size, seed,
                                lambda x, generator: self._augment(self.normalise(x), generator))

    def eval_sets(self, chunk: int = 64):
        def chunks(images):
            for start in range(0, len(images), chunk):
                batch = torch.as_tensor(images[start:start + chunk], device=self.device).permute(0, 3, 1, 2)
                yield self.normalise(batch)
        (qx, qi, qc), (gx, gi, gc) = self.query, self.gallery
        return (chunks(qx), qi, qc), (chunks(gx), gi, gc)


class ReidWorkload(Workload):
    cudnn_benchmark = True

    @property
    def is_pcb(self) -> bool:
        return self.info.name == "pcb"

    def build_data(self):
        channels, height, width = self.info.input_shape
        root = data_root()
        split = None
        if root is not None:
            limit = None if self.scale >= 1 else scaled_count(GALLERY, self.scale, 4)
            split = load_market(root, (height, width), max_query=None if limit is None else scaled_count(QUERIES, self.scale, 2),
                                max_gallery=limit)
        if split is not None:
            self.data_kind = "real"
            self.classes = split["train"][2]
            return _MarketImages(split, self.device, self.is_pcb)
        self.classes = IDENTITIES
        return ReidIdentities((channels, height, width), IDENTITIES, self.device)

    def build_model(self):
        if self.is_pcb:
            return PCB(self.classes)
        droprate = float(self.hp["dropout"])
        return DenseReid(self.classes, droprate) if self.info.name == "densenet121" else HrReid(self.classes, droprate)

    def build_optimizer(self):
        heads = classifier_parameter_ids(self.model)
        lr = float(self.hp["learning_rate"])
        base = [p for p in self.model.parameters() if id(p) not in heads]
        head = [p for p in self.model.parameters() if id(p) in heads]
        return torch.optim.SGD([{"params": base, "lr": 0.1 * lr}, {"params": head, "lr": lr}],
                               weight_decay=5e-4, momentum=0.9, nesterov=True)

    def build_scheduler(self):
        step = max(1, int(self.hp["epochs"]) * 2 // 3)
        return torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=step, gamma=0.1)

    def batches(self):
        return self.data.stream(self.batch_size, int(self.hp["seed"]))

    def loss(self, batch):
        x, y = batch
        out = self.model(x)
        if self.is_pcb:
            return sum(F.cross_entropy(part, y) for part in out)
        return F.cross_entropy(out, y)

    @torch.no_grad()
    def _features(self, chunks) -> torch.Tensor:
        feats = []
        for x in chunks:
            feats.append(normalise_features(self.model.embed(x) + self.model.embed(x.flip(3))))
        return torch.cat(feats)

    def _eval_split(self):
        if self.data_kind == "real":
            return self.data.eval_sets()
        ids = scaled_count(TEST_IDENTITIES, self.scale, 2)
        (q_ids, q_cams), (g_ids, g_cams), generator = self.data.query_gallery(
            ids, scaled_count(QUERIES, self.scale, 2), scaled_count(GALLERY, self.scale, 4))
        return ((self.data.render_set(q_ids, q_cams, generator), q_ids.cpu(), q_cams.cpu()),
                (self.data.render_set(g_ids, g_cams, generator), g_ids.cpu(), g_cams.cpu()))

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        (q_chunks, q_ids, q_cams), (g_chunks, g_ids, g_cams) = self._eval_split()
        qf = self._features(q_chunks)
        gf = self._features(g_chunks)
        return rank_and_map(qf, q_ids, q_cams, gf, g_ids, g_cams)


def make(info, hp, device, scale=1.0):
    return ReidWorkload(info, hp, device, scale)
