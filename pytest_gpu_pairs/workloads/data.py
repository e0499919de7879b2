"""Generated data with learnable structure and the real datasets' shapes.

Nothing is downloaded. Every generator makes data whose labels can only be predicted by
learning, so accuracy really depends on learning rate and epochs: a model at lr 0 stays at
chance, and one epoch at the predecessor's default lr does not saturate, because each family mixes the
class signal with class-independent structure (clutter, camera colour casts, decoy tokens) and
noise, so the Bayes error is above zero and the model has to learn what to ignore. Batches are
generated on the training device so that data loading does not stand in for the compute being
measured. Held-out sets come from a fixed seed: the same for every run, so metrics compare.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

DATA_SEED = 20251118
EVAL_SEED = DATA_SEED + 1


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


class Generated:
    """A generated data set: an endless seeded stream of fresh samples for training and a fixed
    held-out set for evaluation, both drawn by the subclass's ``sample(n, generator)``."""

    device: torch.device

    def sample(self, n: int, generator: torch.Generator) -> Any:
        raise NotImplementedError

    def stream(self, batch_size: int, seed: int):
        generator = _generator(self.device, seed)
        while True:
            yield self.sample(batch_size, generator)

    def fixed_set(self, n: int, seed: int = EVAL_SEED):
        return self.sample(n, _generator(self.device, seed))


def _smooth(n: int, shape: tuple[int, ...], cell: int, generator: torch.Generator,
            device: torch.device) -> torch.Tensor:
    """Unit-variance low-frequency fields: random values on a coarse grid, bilinearly upsampled."""
    channels, height, width = shape
    coarse = torch.randn(n, channels, max(2, height // cell), max(2, width // cell), generator=generator,
                         device=device)
    fields = F.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    return fields / fields.flatten(1).std(dim=1).clamp_min(1e-6).view(-1, 1, 1, 1)


def _crop(big: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Per-sample crops of ``big`` (n, c, H, W) at offsets (dy, dx): a random translation."""
    n, channels = big.shape[:2]
    rows = (torch.arange(height, device=big.device).view(1, -1) + dy.view(-1, 1))
    cols = (torch.arange(width, device=big.device).view(1, -1) + dx.view(-1, 1))
    return big[torch.arange(n, device=big.device).view(-1, 1, 1, 1),
               torch.arange(channels, device=big.device).view(1, -1, 1, 1),
               rows.view(n, 1, height, 1), cols.view(n, 1, 1, width)]


@dataclass(frozen=True)
class ImageDifficulty:
    """How hard a generated image task is; tuned per family so one epoch does not saturate.

    signal: amplitude of the class prototype; clutter: amplitude of a class-independent smooth
    field of the same spatial statistics (a random-feature model cannot tell them apart);
    noise: pixel noise; shift: maximum translation in pixels.
    """

    signal: float = 1.0
    clutter: float = 1.0
    noise: float = 1.0
    shift: int = 2
    cell: int = 4


class PrototypeImages(Generated):
    """Image classification: class prototype, translated, plus clutter and noise."""

    def __init__(self, shape: tuple[int, ...], classes: int, device: torch.device,
                 difficulty: ImageDifficulty = ImageDifficulty(), seed: int = DATA_SEED):
        self.shape, self.classes, self.device, self.d = tuple(shape), classes, device, difficulty
        channels, height, width = self.shape
        s = difficulty.shift
        generator = torch.Generator().manual_seed(seed)
        big = _smooth(classes, (channels, height + 2 * s, width + 2 * s), difficulty.cell, generator, torch.device("cpu"))
        self.prototypes = big.to(device)

    def sample(self, n: int, generator: torch.Generator, labels: torch.Tensor | None = None,
               split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
        """``split`` is accepted for the real sources' interface: generated train and test data
        come from one distribution, told apart by their seeds."""
        channels, height, width = self.shape
        d, dev = self.d, self.device
        if labels is None:
            labels = torch.randint(0, self.classes, (n,), device=dev, generator=generator)
        dy = torch.randint(0, 2 * d.shift + 1, (n,), device=dev, generator=generator)
        dx = torch.randint(0, 2 * d.shift + 1, (n,), device=dev, generator=generator)
        x = d.signal * _crop(self.prototypes[labels], dy, dx, height, width)
        x = x + d.clutter * _smooth(n, self.shape, d.cell, generator, dev)
        x = x + d.noise * torch.randn((n, *self.shape), device=dev, generator=generator)
        return x, labels



class ImagePairs(Generated):
    """Pairs of images of one task, labelled 1 when both show the same class. As in
    siamese_network's APP_MATCHER, half the pairs match and the other half pair an image with
    one of a different class."""

    def __init__(self, images: PrototypeImages):
        self.images = images
        self.device = images.device

    def sample(self, n: int, generator: torch.Generator, split: str = "train"):
        x1, y1 = self.images.sample(n, generator, split=split)
        same = torch.rand(n, device=x1.device, generator=generator) < 0.5
        other = (y1 + torch.randint(1, self.images.classes, (n,), device=x1.device, generator=generator)) % self.images.classes
        x2, _ = self.images.sample(n, generator, labels=torch.where(same, y1, other), split=split)
        return x1, x2, same.float()

    def fixed_set(self, n: int, seed: int = EVAL_SEED):
        return self.sample(n, _generator(self.device, seed), split="test")


# --- person re-identification -------------------------------------------------------------

REID_CAMERAS = 6
REID_PARTS = 6


class ReidIdentities:
    """Pedestrians for re-ID: each identity wears 6 horizontal bands of colour and texture (the
    parts PCB pools); each of 6 cameras casts its own colour transform; images are translated and
    carry a cluttered background and noise. Test identities are disjoint from training ones, as
    in Market-1501, so Rank@k/mAP measure learned features, not memorised classes. The nuisances
    are strong enough that raw pixels give Rank@1 2.8 % over 100 test identities (chance 1 %),
    while a small CNN trained 500 steps on the 751 training identities reaches 11 %.
    """

    def __init__(self, shape: tuple[int, int, int], identities: int, device: torch.device, seed: int = DATA_SEED,
                 clutter: float = 1.5, noise: float = 0.6, shift: int = 16, camera_mix: float = 0.8,
                 camera_bias: float = 1.0, gain: float = 1.0):
        self.shape, self.identities, self.device = shape, identities, device
        self.clutter, self.noise, self.shift, self.gain = clutter, noise, shift, gain
        generator = torch.Generator().manual_seed(seed)
        self.train_looks = self._looks(identities, generator)
        self.test_looks = self._looks(identities, generator)
        eye = torch.eye(3).expand(REID_CAMERAS, 3, 3)
        self.cameras = (eye + camera_mix * torch.randn(REID_CAMERAS, 3, 3, generator=generator)).to(device)
        self.camera_bias = (camera_bias * torch.randn(REID_CAMERAS, 3, 1, 1, generator=generator)).to(device)

    def _looks(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Coarse appearance per identity (band colours, texture on a 1/16 grid); images are
        rendered from it per batch, so the data never occupies more than a batch on the device."""
        channels, height, width = self.shape
        big = (height + 2 * self.shift, width + 2 * self.shift)
        bands = torch.randn(n, channels, REID_PARTS, 1, generator=generator)
        texture = torch.randn(n, channels, max(2, big[0] // 16), max(2, big[1] // 16), generator=generator)
        return bands.to(self.device), texture.to(self.device)

    def _appearance(self, looks, ids: torch.Tensor) -> torch.Tensor:
        bands, texture = looks
        height, width = self.shape[1] + 2 * self.shift, self.shape[2] + 2 * self.shift
        colours = F.interpolate(bands[ids], size=(height, width), mode="nearest")
        fine = F.interpolate(texture[ids], size=(height, width), mode="bilinear", align_corners=False)
        return colours + 0.5 * fine / fine.flatten(1).std(dim=1).clamp_min(1e-6).view(-1, 1, 1, 1)

    def render(self, looks, ids: torch.Tensor, cams: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        n = len(ids)
        channels, height, width = self.shape
        dy = torch.randint(0, 2 * self.shift + 1, (n,), device=self.device, generator=generator)
        dx = torch.randint(0, 2 * self.shift + 1, (n,), device=self.device, generator=generator)
        person = _crop(self._appearance(looks, ids), dy, dx, height, width)
        light = 1 + self.gain * (torch.rand(n, 1, 1, 1, device=self.device, generator=generator) - 0.5)
        mixed = light * torch.einsum("nij,njhw->nihw", self.cameras[cams], person) + self.camera_bias[cams]
        mixed = mixed + self.clutter * _smooth(n, self.shape, 8, generator, self.device)
        flip = torch.rand(n, device=self.device, generator=generator) < 0.5
        mixed = torch.where(flip.view(-1, 1, 1, 1), mixed.flip(3), mixed)
        return mixed + self.noise * torch.randn_like(mixed)

    def stream(self, batch_size: int, seed: int):
        generator = _generator(self.device, seed)
        while True:
            ids = torch.randint(0, self.identities, (batch_size,), device=self.device, generator=generator)
            cams = torch.randint(0, REID_CAMERAS, (batch_size,), device=self.device, generator=generator)
            yield self.render(self.train_looks, ids, cams, generator), ids

    def query_gallery(self, test_ids: int, queries: int, gallery: int, seed: int = EVAL_SEED):
        """A Market-style split over ``test_ids`` unseen identities: (images, ids, cams) for
        query and gallery, generated lazily in chunks by the caller via ``render_set``."""
        generator = _generator(self.device, seed)
        q_ids = torch.arange(queries, device=self.device) % test_ids
        g_ids = torch.arange(gallery, device=self.device) % test_ids
        q_cams = torch.randint(0, REID_CAMERAS, (queries,), device=self.device, generator=generator)
        g_cams = torch.randint(0, REID_CAMERAS, (gallery,), device=self.device, generator=generator)
        return (q_ids, q_cams), (g_ids, g_cams), generator

    def render_set(self, ids: torch.Tensor, cams: torch.Tensor, generator: torch.Generator,
                   chunk: int = 64):
        for start in range(0, len(ids), chunk):
            yield self.render(self.test_looks, ids[start:start + chunk], cams[start:start + chunk], generator)


# --- token sequences --------------------------------------------------------------------------

def zipf_probs(vocab: int, exponent: float = 1.1) -> torch.Tensor:
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    p = ranks.pow(-exponent)
    return (p / p.sum()).float()


class MarkovText:
    """A language: each word has a few likely successors (Zipfian), mixed with Zipfian unigram
    noise. A model lowers perplexity only by learning the successor table; at lr 0 it stays near
    the vocabulary size."""

    def __init__(self, vocab: int, device: torch.device, successors: int = 16, follow: float = 0.75,
                 seed: int = DATA_SEED):
        self.vocab, self.device, self.follow = vocab, device, follow
        generator = torch.Generator().manual_seed(seed)
        self.unigram = zipf_probs(vocab).to(device)
        self.table = torch.multinomial(zipf_probs(vocab).expand(1, -1), vocab * successors, replacement=True,
                                       generator=generator).view(vocab, successors).to(device)
        self.successor_p = zipf_probs(successors, 1.0).to(device)

    def start(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        return torch.multinomial(self.unigram, batch, replacement=True, generator=generator)

    def continue_streams(self, current: torch.Tensor, length: int, generator: torch.Generator) -> torch.Tensor:
        """The next ``length`` tokens of each stream after ``current``: shape (length + 1, batch),
        row 0 being ``current`` (inputs are rows :-1, targets rows 1:)."""
        batch = len(current)
        out = torch.empty(length + 1, batch, dtype=torch.long, device=self.device)
        out[0] = current
        for t in range(1, length + 1):
            pick = torch.multinomial(self.successor_p, batch, replacement=True, generator=generator)
            noise = torch.multinomial(self.unigram, batch, replacement=True, generator=generator)
            follow = torch.rand(batch, device=self.device, generator=generator) < self.follow
            out[t] = torch.where(follow, self.table[out[t - 1], pick], noise)
        return out


class MotifSequences(Generated):
    """Code-like token sequences for vulnerability detection: Zipfian tokens, padded after a
    random length; a sequence is vulnerable (label 1) when it contains one of a few motifs (token
    trigrams), and safe sequences carry decoys (motif prefixes), so the signal is sparse and
    must be learned.
    """

    def __init__(self, length: int, vocab: int, device: torch.device, motifs: int = 8, positive: float = 0.45,
                 pad_id: int = 1, first_token: int = 5, seed: int = DATA_SEED):
        self.length, self.vocab, self.device, self.positive, self.pad_id = length, vocab, device, positive, pad_id
        self.first_token = first_token
        generator = torch.Generator().manual_seed(seed)
        self.unigram = zipf_probs(vocab - first_token).to(device)
        self.motifs = (first_token + torch.randint(0, 2000, (motifs, 3), generator=generator)).to(device)

    def sample(self, n: int, generator: torch.Generator):
        dev, length = self.device, self.length
        tokens = self.first_token + torch.multinomial(self.unigram, n * length, replacement=True,
                                                      generator=generator).view(n, length)
        lengths = torch.randint(length // 4, length + 1, (n,), device=dev, generator=generator)
        labels = (torch.rand(n, device=dev, generator=generator) < self.positive).long()
        which = torch.randint(0, len(self.motifs), (n,), device=dev, generator=generator)
        start = (torch.rand(n, device=dev, generator=generator) * (lengths - 4).float()).long() + 1
        span = start.view(-1, 1) + torch.arange(3, device=dev).view(1, -1)
        motif = self.motifs[which].clone()
        decoy = labels == 0
        motif[decoy, 2] = self.first_token + torch.randint(2000, 4000, (int(decoy.sum()),), device=dev,
                                                           generator=generator)
        tokens.scatter_(1, span, motif)
        tokens[:, 0] = 0
        positions = torch.arange(length, device=dev).view(1, -1)
        mask = positions < lengths.view(-1, 1)
        tokens = torch.where(mask, tokens, torch.full_like(tokens, self.pad_id))
        return tokens, mask.long(), labels



class ClonePairs(Generated):
    """Code clone pairs over an AST-token vocabulary: programs come from templates (one per
    problem, as OJClone's 104 problems); a clone is another program of the same template with
    tokens substituted and spans shifted; a non-clone comes from another template."""

    def __init__(self, length: int, vocab: int, device: torch.device, templates: int = 104, edit: float = 0.3,
                 seed: int = DATA_SEED):
        self.length, self.vocab, self.device, self.edit = length, vocab, device, edit
        generator = torch.Generator().manual_seed(seed)
        self.templates = torch.randint(1, vocab, (templates, length), generator=generator).to(device)

    def _program(self, template_ids: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        n, dev = len(template_ids), self.device
        base = self.templates[template_ids]
        shift = torch.randint(-8, 9, (n,), device=dev, generator=generator)
        index = (torch.arange(self.length, device=dev).view(1, -1) + shift.view(-1, 1)).clamp(0, self.length - 1)
        program = base.gather(1, index)
        substitute = torch.rand(program.shape, device=dev, generator=generator) < self.edit
        random_tokens = torch.randint(1, self.vocab, program.shape, device=dev, generator=generator)
        return torch.where(substitute, random_tokens, program)

    def sample(self, n: int, generator: torch.Generator):
        dev = self.device
        first = torch.randint(0, len(self.templates), (n,), device=dev, generator=generator)
        other = (first + torch.randint(1, len(self.templates), (n,), device=dev, generator=generator)) % len(self.templates)
        clone = torch.rand(n, device=dev, generator=generator) < 0.5
        second = torch.where(clone, first, other)
        return self._program(first, generator), self._program(second, generator), clone.float()



def scaled_count(full: int, scale: float, floor: int) -> int:
    """Evaluation-set size at ``scale``: a scaled run evaluates on a scaled set, never below
    ``floor`` (enough to tell learning from chance) nor above the real set."""
    return int(min(full, max(floor, math.ceil(full * scale))))
