"""A dense-prediction stand-in for the predecessor's 4-versus-6 GPU job: DeepLabv3 (an ASPP head
on a dilated ResNet, Chen et al. 2017) segmenting 600 x 600 scenes, fp16, one sample per GPU.

The predecessor's job trained a dense-prediction network (its note names "Attention or ASPP"
modules) on 600 x 600 inputs with fp16, one sample per GPU, 2.6 s per iteration of which 0.44 s
was data time, with its data loader running in the training process (``workers_per_gpu 0``).
This workload keeps what can be kept on other hardware: the input size, the batch, the
precision, and a data pipeline that runs on the CPU in the training process, as mmsegmentation's
does: each sample is drawn (the decoding's stand-in) at a random scale of 0.75-1.5, cropped to
600 x 600 (padding labelled ``IGNORE``), flipped, photometrically distorted and normalised, then
copied to the GPU. Unlike the other built-ins, whose batches are generated on the device so that
data loading does not stand in for the compute being measured, here the data time is part of what
the stand-in matches (compute against data loading); ``loader_workers`` moves the pipeline into a
``DataLoader`` with that many worker processes, the predecessor's first alternative.

The scenes are learnable: shapes of ``CLASSES - 1`` kinds, each with its own colour and stripe
frequency, over a textured background, so a pixel's class is read from its colour and
neighbourhood, and the loss falls with training. The backbone keeps BatchNorm as DeepLabv3 does;
with one sample per GPU each rank normalises over its own sample's pixels, so a DDP step of N
ranks and N accumulated one-sample steps on one GPU compute the same gradient (what the
convergence probe relies on). The ASPP head uses GroupNorm: its pooling branch has one value per
channel, which BatchNorm cannot normalise at batch 1.
"""
from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_gpu_pairs.workloads import backbones
from pytest_gpu_pairs.workloads.data import DATA_SEED, EVAL_SEED, scaled_count
from pytest_gpu_pairs.workloads.train import Workload

CLASSES = 9
IGNORE = 255
VAL_IMAGES, EVAL_FLOOR = 500, 4
SCALE_RANGE = (0.75, 1.5)
NOISE_SIZE = 1024  # the largest scene: 1.5 x a 600-pixel crop, rounded up
MEAN = np.array([123.675, 116.28, 103.53], dtype=np.float32)  # mmsegmentation's ImageNet normalisation
STD = np.array([58.395, 57.12, 57.375], dtype=np.float32)
HEAD_CHANNELS, HEAD_GROUPS = 256, 32
DEPTHS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}
ASPP_RATES = {16: (6, 12, 18), 8: (12, 24, 36)}


def _palette() -> tuple[np.ndarray, np.ndarray]:
    """Each class's mean colour and stripe frequency, fixed for every run."""
    rng = np.random.default_rng(DATA_SEED)
    colours = rng.uniform(30, 225, size=(CLASSES, 3)).astype(np.float32)
    return colours, rng.uniform(0.05, 0.6, size=CLASSES).astype(np.float32)


COLOURS, STRIPES = _palette()


def _paint_shape(rng: np.random.Generator, label: np.ndarray, kind: int) -> None:
    """A random disc or rotated rectangle of a tenth to a third of the scene, painted inside its box."""
    size = label.shape[0]
    cy, cx = rng.uniform(0, size, 2)
    radius = rng.uniform(0.05, 0.17) * size
    top, bottom = max(0, int(cy - radius)), min(size, int(cy + radius) + 1)
    left, right = max(0, int(cx - radius)), min(size, int(cx + radius) + 1)
    if top >= bottom or left >= right:
        return
    rows = np.arange(top, bottom, dtype=np.float32)[:, None] - cy
    cols = np.arange(left, right, dtype=np.float32)[None, :] - cx
    if rng.random() < 0.5:
        inside = rows**2 + cols**2 <= radius**2
    else:
        angle = rng.uniform(0, math.pi)
        u = rows * math.cos(angle) + cols * math.sin(angle)
        v = -rows * math.sin(angle) + cols * math.cos(angle)
        inside = (np.abs(u) <= radius) & (np.abs(v) <= radius * rng.uniform(0.3, 1.0))
    label[top:bottom, left:right][inside] = kind


def scene(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(image HxWx3 float32 in 0-255, label HxW uint8) of ``size`` x ``size`` pixels: shapes
    coloured by class, striped at the class's frequency, with pixel noise."""
    label = np.zeros((size, size), dtype=np.uint8)
    for _ in range(int(rng.integers(3, 9))):
        _paint_shape(rng, label, int(rng.integers(1, CLASSES)))
    diagonal = np.arange(size, dtype=np.float32)
    diagonal = (diagonal[:, None] + diagonal[None, :]) * np.float32(600.0 / size) + np.float32(rng.uniform(0, 2 * math.pi))
    stripes = np.sin(STRIPES[label] * diagonal)
    image = COLOURS[label] + (25.0 * stripes)[..., None]
    top, left = (int(v) for v in rng.integers(0, NOISE_SIZE - size + 1, 2))
    image += _noise_bank()[top:top + size, left:left + size]
    return np.clip(image, 0, 255, out=image), label


@functools.lru_cache(maxsize=1)
def _noise_bank() -> np.ndarray:
    """Pixel noise (sd 20) that scenes take windows of: drawing it fresh per pixel would make noise
    generation the pipeline's largest cost, which no real loader pays."""
    rng = np.random.default_rng(DATA_SEED + 2)
    return rng.standard_normal(size=(NOISE_SIZE, NOISE_SIZE, 3), dtype=np.float32) * np.float32(20.0)


def _photometric(rng: np.random.Generator, image: np.ndarray) -> np.ndarray:
    """mmsegmentation's PhotoMetricDistortion, reduced to brightness, contrast and a colour cast,
    in place on a crop of its own."""
    contrast = np.float32(rng.uniform(0.5, 1.5))
    shift = np.float32(rng.uniform(-32, 32)) + (np.float32(1.0) - contrast) * image.mean(dtype=np.float32)
    image *= contrast
    image += shift
    np.clip(image, 0, 255, out=image)
    image *= rng.uniform(0.9, 1.1, size=3).astype(np.float32)
    return np.clip(image, 0, 255, out=image)


def _padded(image: np.ndarray, label: np.ndarray, crop: int) -> tuple[np.ndarray, np.ndarray]:
    """A scene smaller than the crop, padded to it (label ``IGNORE``) as RandomCrop's pad does."""
    size = label.shape[0]
    if size >= crop:
        return image, label
    padded_image = np.zeros((crop, crop, 3), dtype=np.float32)
    padded_label = np.full((crop, crop), IGNORE, dtype=np.uint8)
    padded_image[:size, :size], padded_label[:size, :size] = image, label
    return padded_image, padded_label


def train_sample(rng: np.random.Generator, crop: int) -> tuple[np.ndarray, np.ndarray]:
    """One training sample through the pipeline: (image 3xHxW normalised float32, label HxW int64)."""
    image, label = _padded(*scene(rng, max(8, int(round(crop * rng.uniform(*SCALE_RANGE))))), crop)
    top, left = (int(rng.integers(0, label.shape[0] - crop + 1)) for _ in range(2))
    step = -1 if rng.random() < 0.5 else 1
    image = image[top:top + crop, left:left + crop][:, ::step].copy()
    label = label[top:top + crop, left:left + crop][:, ::step]
    return _normalised(_photometric(rng, image)), label.astype(np.int64)


def _normalised(image: np.ndarray) -> np.ndarray:
    """HxWx3 in 0-255 to 3xHxW, ImageNet-normalised."""
    image -= MEAN
    image /= STD
    return np.ascontiguousarray(image.transpose(2, 0, 1))


def val_sample(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A held-out sample: the scene at the input size, normalised, no augmentation."""
    image, label = scene(rng, size)
    return _normalised(image), label.astype(np.int64)


class SceneStream(torch.utils.data.IterableDataset):
    """An endless stream of training samples; each loader worker draws its own seeded stream."""

    def __init__(self, seed: int, crop: int):
        super().__init__()
        self.seed, self.crop = seed, crop

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        worker = torch.utils.data.get_worker_info()
        rng = np.random.default_rng([self.seed, worker.id if worker is not None else 0])
        while True:
            image, label = train_sample(rng, self.crop)
            yield torch.from_numpy(image), torch.from_numpy(label)


def _dilate(layer: nn.Sequential, dilation: int) -> None:
    """torchvision's replace_stride_with_dilation for one stage: its stride becomes a dilation."""
    blocks = cast(list[backbones.Bottleneck], list(layer))
    blocks[0].conv2.stride = (1, 1)
    if blocks[0].downsample is not None:
        cast(nn.Conv2d, cast(nn.Sequential, blocks[0].downsample)[0]).stride = (1, 1)
    for block in blocks[1:]:
        block.conv2.dilation, block.conv2.padding = (dilation, dilation), (dilation, dilation)


def _norm_relu(channels: int) -> list[nn.Module]:
    return [nn.GroupNorm(HEAD_GROUPS, channels), nn.ReLU(inplace=True)]


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: a 1x1 branch, three dilated 3x3 branches and image pooling."""

    def __init__(self, channels: int, rates: tuple[int, int, int]):
        super().__init__()
        branches = [nn.Sequential(nn.Conv2d(channels, HEAD_CHANNELS, 1, bias=False), *_norm_relu(HEAD_CHANNELS))]
        branches += [nn.Sequential(nn.Conv2d(channels, HEAD_CHANNELS, 3, padding=r, dilation=r, bias=False),
                                   *_norm_relu(HEAD_CHANNELS)) for r in rates]
        self.branches = nn.ModuleList(branches)
        self.pooling = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, HEAD_CHANNELS, 1, bias=False),
                                     *_norm_relu(HEAD_CHANNELS))
        self.project = nn.Sequential(nn.Conv2d(HEAD_CHANNELS * 5, HEAD_CHANNELS, 1, bias=False),
                                     *_norm_relu(HEAD_CHANNELS), nn.Dropout(0.1))

    def forward(self, x):
        pooled = F.interpolate(self.pooling(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.project(torch.cat([branch(x) for branch in self.branches] + [pooled], dim=1))


class DeepLabV3(nn.Module):
    def __init__(self, depth: int, output_stride: int, classes: int = CLASSES):
        super().__init__()
        trunk = backbones.ResNet(backbones.Bottleneck, DEPTHS[depth])
        _dilate(trunk.layer4, 2 if output_stride == 16 else 4)
        if output_stride == 8:
            _dilate(trunk.layer3, 2)
        del trunk.fc, trunk.avgpool  # the classifier: features() is all the head reads
        self.backbone = trunk
        self.head = nn.Sequential(ASPP(2048, ASPP_RATES[output_stride]),
                                  nn.Conv2d(HEAD_CHANNELS, HEAD_CHANNELS, 3, padding=1, bias=False),
                                  *_norm_relu(HEAD_CHANNELS), nn.Conv2d(HEAD_CHANNELS, classes, 1))

    def forward(self, x):
        logits = self.head(self.backbone.features(x))
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


class DenseAsppWorkload(Workload):
    eval_every_epoch = True
    cudnn_benchmark = True  # mmsegmentation's default (cudnn_benchmark = True)

    @property
    def amp(self) -> bool:
        return self.device.type == "cuda"

    @property
    def crop(self) -> int:
        return int(self.hp["image_size"])

    def build_model(self):
        depth, stride = int(self.hp["backbone_depth"]), int(self.hp["output_stride"])
        if depth not in DEPTHS or stride not in ASPP_RATES:
            raise ValueError(f"dense_aspp: expected backbone_depth in {sorted(DEPTHS)} and output_stride in "
                             f"{sorted(ASPP_RATES)}, got {depth} and {stride}")
        model = DeepLabV3(depth, stride)
        return model.to(memory_format=torch.channels_last) if self.amp else model  # type: ignore[call-overload]

    def build_optimizer(self):
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        return torch.optim.AdamW(self.model.parameters(), lr=float(self.hp["learning_rate"]),
                                 weight_decay=float(self.hp["weight_decay"]))

    def loader(self, seed: int, workers: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches of CPU tensors: drawn in this process (no workers) or by ``workers`` processes."""
        stream = SceneStream(seed, self.crop)
        if workers <= 0:
            samples = iter(stream)
            while True:
                pairs = [next(samples) for _ in range(self.batch_size)]
                yield torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])
        loader = torch.utils.data.DataLoader(stream, batch_size=self.batch_size, num_workers=workers,
                                             pin_memory=self.amp, persistent_workers=True)
        yield from loader

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = batch
        images = images.to(self.device, non_blocking=True)
        if self.amp:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels.to(self.device, non_blocking=True)

    def batches(self):
        for batch in self.loader(int(self.hp["seed"]), int(self.hp["loader_workers"])):
            yield self.to_device(batch)

    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.float16) if self.amp else contextlib.nullcontext()

    def loss(self, batch):
        images, labels = batch
        with self._autocast():
            logits = self.model(images)
        return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE)

    def backward(self, loss: torch.Tensor, share: float = 1.0) -> None:
        """Gradients of ``share`` of the loss added to those already held (accumulation)."""
        self.scaler.scale(loss * share).backward()

    def optimizer_step(self) -> None:
        """One update from the gradients held; they stay until the next step clears them (DDP's
        unused-parameter check reads them)."""
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def train_step(self, batch):
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        self.backward(loss)
        self.optimizer_step()
        return loss

    def held_out(self, count: int, seed: int = EVAL_SEED) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``count`` held-out samples, one at a time, on the device: the same for every run."""
        rng = np.random.default_rng(seed)
        for _ in range(count):
            image, label = val_sample(rng, self.crop)
            yield self.to_device((torch.from_numpy(image)[None], torch.from_numpy(label)[None]))

    @torch.no_grad()
    def validate(self, count: int, seed: int = EVAL_SEED) -> dict[str, float]:
        """Loss, pixel accuracy and mean IoU over ``count`` held-out samples, whole-image inference."""
        self.model.eval()
        losses, hits, pixels = [], 0, 0
        intersection, union = np.zeros(CLASSES), np.zeros(CLASSES)
        for images, labels in self.held_out(count, seed):
            with self._autocast():
                logits = self.model(images).float()
            losses.append(F.cross_entropy(logits, labels).item())
            predicted = logits.argmax(1)
            hits += int((predicted == labels).sum())
            pixels += labels.numel()
            for k in range(CLASSES):
                p, t = predicted == k, labels == k
                intersection[k] += int((p & t).sum())
                union[k] += int((p | t).sum())
        present = union > 0
        return {"miou": float((intersection[present] / union[present]).mean()), "pixel_accuracy": hits / pixels,
                "eval_loss": float(np.mean(losses))}

    def evaluate(self):
        return self.validate(scaled_count(VAL_IMAGES, self.scale, EVAL_FLOOR))

    def final_metrics(self):
        return self.history[-1] if self.history else self.evaluate()


def make(info, hp: dict[str, Any], device: str, scale: float = 1.0):
    return DenseAsppWorkload(info, hp, device, scale)
