"""Published model shapes, accelerators and hosts: the facts the generators build iterations
from.

Sources (shared/REFERENCES.md, "Training workloads", and the papers and datasheets named):
- Model shapes: GPT-3's layers and hidden sizes (Brown et al. 2020, table 2.1); GPT-2 XL's
  (Radford et al. 2019); the GPT models of Megatron-LM's weak-scaling table (Narayanan et al.,
  SC'21, table 1: layers, hidden size, heads; vocabulary 51,200, sequence 2,048); ResNet-50's
  3.8e9 multiply-adds per 224x224 image (He et al. 2016, table 1).
- Transformer FLOPs per iteration of B samples (Narayanan et al., section 5.1, counting only
  the GEMMs): forward 24·B·s·l·h²·(1 + s/6h) + 2·B·s·h·V; backward twice the forward; with
  full activation recomputation the layers' forward runs once more, so
  96·B·s·l·h²·(1 + s/6h + V/16lh) (with) and 72·B·s·l·h²·(1 + s/6h + V/12lh) (without).
  A CNN's training FLOPs are 3 x its forward FLOPs.
- Accelerators, dense BF16 peak: A100 312 TFLOP/s (NVIDIA A100 datasheet), H100 SXM
  989 TFLOP/s (NVIDIA H100 datasheet). NVLink: the datasheets' 600 GB/s (A100, NVLink 3,
  12 links) and 900 GB/s (H100, NVLink 4, 18 links) count both directions, so a GPU sends
  300 and 450 GB/s (25 GB/s per link and direction).
- Hosts: DGX A100 has 8 ConnectX-6 HDR InfiniBand ports of 200 Gb/s for its 8 GPUs, DGX H100
  8 ConnectX-7 ports of 400 Gb/s (NVIDIA DGX A100 and DGX H100 user guides; Gb/s per
  direction). PCIe Gen4 x16: 32 GB/s per direction.
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
    forward_flops_per_sample: float = 0.0   # CNN
    vocab: int = 51200            # transformer: the (padded) vocabulary Megatron-LM uses
    heads: int = 0

    def forward_flops(self, samples: float) -> float:
        """One forward pass over `samples` samples: Megatron-LM's GEMM count (a CNN's
        published forward FLOPs)."""
        if not self.hidden:
            return self.forward_flops_per_sample * samples
        b, s, h, lay = samples, self.seq, self.hidden, self.layers
        return 24 * b * s * lay * h * h * (1 + s / (6 * h)) + 2 * b * s * h * self.vocab

    def layers_forward_flops(self, samples: float) -> float:
        """The transformer layers' share of a forward pass (what recomputation repeats)."""
        b, s, h, lay = samples, self.seq, self.hidden, self.layers
        return 24 * b * s * lay * h * h * (1 + s / (6 * h)) if self.hidden else 0.0

    def train_flops(self, samples: float, recompute: bool = False) -> float:
        """FLOPs of forward and backward over `samples` samples: 3 x forward, plus the
        layers' forward again with activation recomputation (Megatron-LM's 96 B s l h²
        (1 + s/6h + V/16lh); 72 B s l h² (1 + s/6h + V/12lh) without)."""
        extra = self.layers_forward_flops(samples) if recompute else 0.0
        return 3 * self.forward_flops(samples) + extra


def _gpt(name: str, layers: int, hidden: int, heads: int, seq: int = 2048) -> Model:
    """A GPT of Megatron-LM's shape; parameters 12 l h² (1 + 13/12h + (V + s)/12lh)."""
    v = 51200
    params = 12 * layers * hidden ** 2 * (1 + 13 / (12 * hidden) + (v + seq) / (12 * layers
                                                                              * hidden))
    return Model(name, params, layers, hidden, seq, vocab=v, heads=heads)


MODELS = {
    "resnet50": Model("ResNet-50", 25.6e6, 50, forward_flops_per_sample=2 * 3.8e9),
    "bert-large": Model("BERT-large", 340e6, 24, hidden=1024, seq=512, vocab=30522, heads=16),
    "gpt2-1.5b": Model("GPT-2 XL 1.5B", 1.5e9, 48, hidden=1600, seq=1024, vocab=50257,
                       heads=25),
    "gpt3-13b": Model("GPT-3 13B", 13e9, 40, hidden=5120, seq=2048, heads=40),
    "gpt3-175b": Model("GPT-3 175B", 175e9, 96, hidden=12288, seq=2048, heads=96),
    # Megatron-LM SC'21, table 1 (weak scaling on DGX A100)
    "megatron-1.7b": _gpt("Megatron GPT 1.7B", 24, 2304, 24),
    "megatron-3.6b": _gpt("Megatron GPT 3.6B", 30, 3072, 32),
    "megatron-7.5b": _gpt("Megatron GPT 7.5B", 36, 4096, 32),
    "megatron-18.4b": _gpt("Megatron GPT 18.4B", 40, 6144, 48),
    "megatron-39.1b": _gpt("Megatron GPT 39.1B", 48, 8192, 64),
    "megatron-76.1b": _gpt("Megatron GPT 76.1B", 60, 10240, 80),
}


@dataclass(frozen=True)
class Gpu:
    name: str
    peak_flops: float             # dense BF16, FLOP/s
    nvlink_bytes_s: float         # per GPU and direction


GPUS = {
    "a100": Gpu("A100", 312e12, 300 * GB),
    "h100": Gpu("H100 SXM", 989e12, 450 * GB),
}
PCIE4_BYTES_S = 32 * GB           # PCIe Gen4 x16, per direction


@dataclass(frozen=True)
class Host:
    """A server: `gpus` GPUs and `nics` NICs of `nic_gbps` each (Gb/s per direction)."""
    name: str
    gpu: Gpu
    gpus: int = 8
    nics: int = 8
    nic_gbps: float = 200.0

    @property
    def gbps(self) -> float:
        """The host's network bandwidth per direction, all NICs together."""
        return self.nics * self.nic_gbps


HOSTS = {
    "dgx-a100": Host("DGX A100", GPUS["a100"], 8, 8, 200.0),
    "dgx-h100": Host("DGX H100", GPUS["h100"], 8, 8, 400.0),
}


# The achieved fraction of an A100's peak on Megatron-LM's GEMMs, calibrated once:
# `workloads.megatron.calibrate()` on table 1's first row (1.7B, 32 GPUs, 137 TFLOP/s per
# GPU) gives it, and its test holds the two equal.
EFFICIENCY = 0.447


@dataclass(frozen=True)
class Cluster:
    """`gpus` GPUs, `gpus_per_host` behind each host's network; intra-host transfers at
    `intra_bytes_s` per GPU and direction (NVLink or PCIe class); compute at `efficiency` of
    the GPU's peak (the achieved fraction on the model's GEMMs: calibrated, see
    `workloads/megatron.py`, not assumed)."""
    gpus: int
    gpus_per_host: int = 8
    gpu: Gpu = GPUS["a100"]
    efficiency: float = EFFICIENCY
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
