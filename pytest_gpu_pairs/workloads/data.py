"""Generated data with learnable structure and the real datasets' shapes.

Each class has a smooth prototype image; a sample is its class prototype, randomly scaled,
plus noise. A model must learn the prototypes to beat chance, so accuracy really depends on
learning rate and epochs, and nothing is downloaded. Batches are generated on the training
device so that data loading does not stand in for the compute being measured.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

DATA_SEED = 20251118


class PrototypeImages:
    def __init__(self, shape: tuple[int, ...], classes: int, device: torch.device, noise: float = 1.0,
                 seed: int = DATA_SEED):
        self.shape, self.classes, self.device, self.noise = tuple(shape), classes, device, noise
        generator = torch.Generator().manual_seed(seed)
        channels, height, width = self.shape
        coarse = torch.randn(classes, channels, max(2, height // 4), max(2, width // 4), generator=generator)
        protos = F.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
        self.prototypes = (protos / protos.flatten(1).std(dim=1).view(-1, 1, 1, 1)).to(device)

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, self.classes, (n,), device=self.device, generator=generator)
        gain = 0.5 + torch.rand(n, 1, 1, 1, device=self.device, generator=generator)
        noise = torch.randn((n, *self.shape), device=self.device, generator=generator)
        return self.prototypes[labels] * gain + self.noise * noise, labels

    def stream(self, batch_size: int, seed: int):
        generator = torch.Generator(device=self.device).manual_seed(seed)
        while True:
            yield self.sample(batch_size, generator)

    def fixed_set(self, n: int, seed: int = DATA_SEED + 1) -> tuple[torch.Tensor, torch.Tensor]:
        """A held-out set, the same for every run, so test accuracy is comparable across runs."""
        return self.sample(n, torch.Generator(device=self.device).manual_seed(seed))
