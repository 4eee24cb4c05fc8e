"""Published model sizes and accelerators: the facts the generators build iterations from.

Sources (shared/REFERENCES.md, "Training workloads", and the models' papers): parameter
counts; GPT-3's layers and hidden sizes (Brown et al. 2020, table 2.1); GPT-2 XL's (Radford et
al. 2019); ResNet-50's 3.8e9 multiply-adds per 224x224 image (He et al. 2016, table 1);
training FLOPs of a transformer = 6 x parameters x tokens (forward 2, backward 4); a CNN's =
3 x its forward FLOPs. Dense BF16 peaks: A100 312 TFLOP/s, H100 SXM 989 TFLOP/s.
"""
from __future__ import annotations

from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class Model:
    name: str
    params: float                 # parameters
    layers: int                   # transformer blocks (CNN: the stages gradients are bucketed by)
    hidden: int = 0               # transformer hidden size (0: not a transformer)
    seq: int = 0                  # tokens per sample
    forward_flops_per_sample: float = 0.0   # CNN; transformers use 2 x params x seq

    def train_flops(self, samples: float) -> float:
        """FLOPs of forward and backward over `samples` samples."""
        if self.hidden:
            return 6 * self.params * self.seq * samples
        return 3 * self.forward_flops_per_sample * samples


MODELS = {
    "resnet50": Model("ResNet-50", 25.6e6, 50, forward_flops_per_sample=2 * 3.8e9),
    "bert-large": Model("BERT-large", 340e6, 24, hidden=1024, seq=512),
    "gpt2-1.5b": Model("GPT-2 XL 1.5B", 1.5e9, 48, hidden=1600, seq=1024),
    "gpt3-13b": Model("GPT-3 13B", 13e9, 40, hidden=5120, seq=2048),
    "gpt3-175b": Model("GPT-3 175B", 175e9, 96, hidden=12288, seq=2048),
}


@dataclass(frozen=True)
class Gpu:
    name: str
    peak_flops: float             # dense BF16, FLOP/s
    nvlink_bytes_s: float         # per GPU


GPUS = {
    "a100": Gpu("A100", 312e12, 600 * GB),
    "h100": Gpu("H100 SXM", 989e12, 900 * GB),
}
PCIE4_BYTES_S = 32 * GB           # PCIe Gen4 x16, per direction


@dataclass(frozen=True)
class Cluster:
    """`gpus` GPUs, `gpus_per_host` behind each host's one NIC; intra-host transfers at
    `intra_bytes_s` per GPU and direction (NVLink or PCIe class); compute at `efficiency` of
    the GPU's peak (model-FLOPs utilisation, 30-55 % in large runs)."""
    gpus: int
    gpus_per_host: int = 8
    gpu: Gpu = GPUS["a100"]
    efficiency: float = 0.4
    intra_bytes_s: float = GPUS["a100"].nvlink_bytes_s

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.gpus_per_host < 1 or self.gpus % self.gpus_per_host:
            raise ValueError(f"{self.gpus} GPUs do not fill hosts of {self.gpus_per_host}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency}")
        if self.intra_bytes_s <= 0:
            raise ValueError("the intra-host bandwidth must be positive")

    @property
    def hosts(self) -> int:
        return self.gpus // self.gpus_per_host

    def seconds(self, flops: float) -> float:
        return flops / (self.gpu.peak_flops * self.efficiency)
