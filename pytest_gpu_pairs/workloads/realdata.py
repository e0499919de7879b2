"""The real datasets, read from their standard on-disk formats when they exist under a data root.

``GPU_PAIRS_DATA_ROOT`` (or the entry point's ``--data-root``) names the root; a workload whose
dataset is found there trains and evaluates on it instead of generated data, and says so in its
result (``data: real``). Nothing is downloaded. Layouts are the ones the original repositories
use, so a user's existing copy works as it is:

- MNIST: ``MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` (torchvision's layout,
  where pytorch/examples downloads it).
- CIFAR-10: ``cifar-10-batches-py/{data_batch_1..5,test_batch}`` (the python pickle release).
- Market-1501: ``Market-1501-v15.09.15/pytorch/{train_all,query,gallery}/<id>/<image>.jpg``, the
  output of Person_reID_baseline_pytorch's ``prepare.py`` (also accepted under ``Market/``).
- Wikitext-2: ``wikitext-2/{train,valid,test}.txt`` (pytorch/examples word_language_model/data).

D2A (VulBERTa), OJClone (MRT-OAST) and the bug-localization features need each repository's
own tokenizer or feature extractor (clang + BPE, the OAST builder, rVSM); their workloads always
use generated data.
"""
from __future__ import annotations

import gzip
import os
import pickle
import struct
from pathlib import Path
from typing import Any, Optional

import numpy as np

ENV_VAR = "GPU_PAIRS_DATA_ROOT"


def data_root() -> Optional[Path]:
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value) if value else None


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _find(folder: Path, stem: str) -> Optional[Path]:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    return None


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (MNIST's format): magic (0, 0, dtype 0x08, ndim), big-endian sizes, bytes."""
    with _open(path) as handle:
        zero, dtype, ndim = struct.unpack(">HBB", handle.read(4))
        if zero != 0 or dtype != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file")
        shape = struct.unpack(f">{ndim}I", handle.read(4 * ndim))
        return np.frombuffer(handle.read(), dtype=np.uint8).reshape(shape)


ImageArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # train images, train labels, test images, test labels


def load_mnist(root: Path) -> Optional[ImageArrays]:
    """(train images, train labels, test images, test labels) as uint8 arrays, or None."""
    folder = root / "MNIST" / "raw"
    stems = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    paths = [_find(folder, stem) for stem in stems]
    found = [p for p in paths if p is not None]
    if len(found) < len(paths):
        return None
    train_x, train_y, test_x, test_y = (read_idx(p).copy() for p in found)
    return train_x, train_y, test_x, test_y


def load_cifar10(root: Path) -> Optional[ImageArrays]:
    """(train images NHWC uint8, train labels, test images, test labels), or None."""
    folder = root / "cifar-10-batches-py"
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    if not all((folder / n).is_file() for n in names):
        return None

    def batch(name):
        with open(folder / name, "rb") as handle:
            entry = pickle.load(handle, encoding="latin1")
        images = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, np.asarray(entry["labels"], dtype=np.int64)

    train = [batch(n) for n in names[:5]]
    test_x, test_y = batch("test_batch")
    return np.concatenate([b[0] for b in train]), np.concatenate([b[1] for b in train]), test_x, test_y


def market_folder(root: Path) -> Optional[Path]:
    for candidate in (root / "Market-1501-v15.09.15" / "pytorch", root / "Market" / "Market-1501-v15.09.15" / "pytorch",
                      root / "Market" / "pytorch"):
        if all((candidate / part).is_dir() for part in ("train_all", "query", "gallery")):
            return candidate
    return None


def market_id_camera(filename: str) -> tuple[int, int]:
    """Identity and camera from a Market-1501 name, e.g. ``0002_c1s1_000451_03.jpg`` -> (2, 1);
    distractor-junk names start with ``-1`` (identity -1), as the baseline's test.py reads them."""
    label = filename[0:4]
    camera = int(filename.split("c")[1][0])
    return (-1 if label[0:2] == "-1" else int(label)), camera


def _read_images(paths: list[Path], size: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    height, width = size
    out = np.empty((len(paths), height, width, 3), dtype=np.uint8)
    for i, path in enumerate(paths):
        with Image.open(path) as image:
            out[i] = np.asarray(image.convert("RGB").resize((width, height), Image.Resampling.BICUBIC))
    return out


def load_market(root: Path, size: tuple[int, int], max_train: Optional[int] = None,
                max_query: Optional[int] = None, max_gallery: Optional[int] = None):
    """Market-1501 resized to ``size`` (bicubic, as the baseline's transforms): a dict with
    ``train`` (images, class index per identity folder), ``query`` and ``gallery`` (images,
    identities, cameras); None when the folder is absent."""
    folder = market_folder(root)
    if folder is None:
        return None
    train_dirs = sorted(p for p in (folder / "train_all").iterdir() if p.is_dir())
    train_paths, train_labels = [], []
    for index, directory in enumerate(train_dirs):
        for image in sorted(directory.glob("*.jpg")):
            train_paths.append(image)
            train_labels.append(index)
    split: dict[str, tuple[np.ndarray, np.ndarray, Any]] = {"train": (_read_images(train_paths[:max_train], size), np.asarray(train_labels[:max_train]),
                       len(train_dirs))}
    for part, limit in (("query", max_query), ("gallery", max_gallery)):
        paths = sorted((folder / part).glob("*/*.jpg"))[:limit]
        ids_cams = np.asarray([market_id_camera(p.name) for p in paths], dtype=np.int64).reshape(-1, 2)
        split[part] = (_read_images(paths, size), ids_cams[:, 0], ids_cams[:, 1])
    return split


def load_wikitext2(root: Path):
    """Token ids of train/valid/test and the vocabulary size, tokenised as pytorch/examples'
    data.py does: whitespace split plus ``<eos>`` per line, one dictionary over the three files."""
    folder = root / "wikitext-2"
    files = [folder / f"{part}.txt" for part in ("train", "valid", "test")]
    if not all(f.is_file() for f in files):
        return None
    index: dict[str, int] = {}
    splits = []
    for path in files:
        ids = []
        with open(path, encoding="utf8") as handle:
            for line in handle:
                for word in line.split() + ["<eos>"]:
                    ids.append(index.setdefault(word, len(index)))
        splits.append(np.asarray(ids, dtype=np.int64))
    return splits[0], splits[1], splits[2], len(index)
