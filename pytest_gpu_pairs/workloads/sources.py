"""Real datasets as batch sources on the training device, with the generated sources' interface.

A source yields training batches (``stream``) and a fixed evaluation set (``fixed_set``); the
generated sources in ``data`` and these wrappers are interchangeable, so a workload trains on
whichever exists. Images stay uint8 on the device and are normalised per batch, as a
DataLoader's ToTensor + Normalize would.
"""
from __future__ import annotations

import numpy as np
import torch


def shuffled_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int, prepare):
    """Epochs of shuffled batches without replacement, the last partial batch dropped, as a
    real dataset's loader gives them; ``prepare(images, generator)`` normalises and augments."""
    generator = torch.Generator(device=x.device).manual_seed(seed)
    while True:
        order = torch.randperm(len(y), device=x.device, generator=generator)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            index = order[start:start + batch_size]
            yield prepare(x[index], generator), y[index]


class ArrayImages:
    """Labelled images (N, H, W[, C] uint8) with per-channel mean/std normalisation."""

    def __init__(self, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                 mean: tuple[float, ...], std: tuple[float, ...], device: torch.device, flip: bool = False,
                 pad_crop: int = 0):
        self.device, self.flip, self.pad_crop = device, flip, pad_crop
        self.train_x, self.train_y = self._images(train_x), torch.as_tensor(train_y, device=device).long()
        self.test_x, self.test_y = self._images(test_x), torch.as_tensor(test_y, device=device).long()
        self.mean = torch.tensor(mean, device=device).view(1, -1, 1, 1)
        self.std = torch.tensor(std, device=device).view(1, -1, 1, 1)
        self.classes = int(self.train_y.max().item()) + 1
        self.shape = tuple(self.train_x.shape[1:])
        self._sorted = {split: self._class_index(y) for split, y in (("train", self.train_y), ("test", self.test_y))}

    def _class_index(self, labels: torch.Tensor):
        """Indices sorted by class, with each class's offset and count, to draw by label."""
        order = torch.argsort(labels, stable=True)
        counts = torch.bincount(labels, minlength=self.classes)
        return order, torch.cumsum(counts, 0) - counts, counts

    def _images(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.as_tensor(np.array(array, copy=True), device=self.device)
        return tensor.unsqueeze(1) if tensor.dim() == 3 else tensor.permute(0, 3, 1, 2).contiguous()

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        return (x.float() / 255.0 - self.mean) / self.std

    def _augment(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.pad_crop:
            p = self.pad_crop
            n, _, h, w = x.shape
            padded = torch.nn.functional.pad(x, (p, p, p, p))
            dy = torch.randint(0, 2 * p + 1, (n,), device=x.device, generator=generator)
            dx = torch.randint(0, 2 * p + 1, (n,), device=x.device, generator=generator)
            rows = (torch.arange(h, device=x.device).view(1, -1) + dy.view(-1, 1)).view(n, 1, h, 1)
            cols = (torch.arange(w, device=x.device).view(1, -1) + dx.view(-1, 1)).view(n, 1, 1, w)
            x = padded[torch.arange(n, device=x.device).view(-1, 1, 1, 1),
                       torch.arange(x.shape[1], device=x.device).view(1, -1, 1, 1), rows, cols]
        if self.flip:
            mirror = torch.rand(len(x), device=x.device, generator=generator) < 0.5
            x = torch.where(mirror.view(-1, 1, 1, 1), x.flip(3), x)
        return x

    def sample(self, n: int, generator: torch.Generator, labels: torch.Tensor | None = None, split: str = "train"):
        """``n`` random images of ``split`` (of the given classes when ``labels`` is set)."""
        images, targets = (self.train_x, self.train_y) if split == "train" else (self.test_x, self.test_y)
        if labels is None:
            index = torch.randint(0, len(targets), (n,), device=self.device, generator=generator)
        else:
            order, offsets, counts = self._sorted[split]
            pick = (torch.rand(n, device=self.device, generator=generator) * counts[labels]).long()
            index = order[offsets[labels] + pick]
        x = self.normalise(images[index])
        return (self._augment(x, generator) if split == "train" else x), targets[index]

    def stream(self, batch_size: int, seed: int):
        return shuffled_batches(self.train_x, self.train_y, batch_size, seed,
                                lambda x, generator: self._augment(self.normalise(x), generator))

    def fixed_set(self, n: int, seed: int = 0):
        return self.normalise(self.test_x[:n]), self.test_y[:n]
