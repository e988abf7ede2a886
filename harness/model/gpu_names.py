"""A table of known GPU names: the second reading of a `gpu` condition (issue 52).

harness.model.conditions.gpu_matches reads a GPU name by its words. A one-line slip there
(matching 'A100' as a prefix, so that 'NVIDIA RTX A1000 6GB Laptop GPU' meets it) would turn a
laptop GPU into a comparable run, and nothing would notice. So each `gpu` condition is read a
second time, here, by a method that shares no code with the first: the exact names NVML (and
torch.cuda.get_device_name) report, looked up whole in a table that says which model family
each one is, its variant words (memory size, form factor) and whether it is a MIG slice.
harness.model.conditions.differ makes both readings; where they disagree, or where this table
does not know a name, the condition is `not comparable here`, with both readings.

How a claim's model is read here: its leading vendor words ('NVIDIA', 'Tesla', 'GeForce') are
dropped, the longest run of its words that is a family of the table is the family ('RTX 4090',
'A100', 'H100'), and every further word must be one of the GPU's variant words ('80GB',
'SXM4', 'PCIe', 'NVL') or 'MIG' (or a MIG profile, '1g.5gb'). A claim whose family the table
does not know is unknown: the table is extended, never guessed.

MIG slices: a MIG slice ('NVIDIA A100-SXM4-40GB MIG 1g.5gb': a known full name, ' MIG ', a
profile Ng.Mgb[+me]) is a part of the GPU, with a fraction of its compute and memory: it does
NOT meet a claim of the model ('A100'); it meets only a claim that names MIG ('A100 MIG',
'A100 MIG 1g.5gb'), and a claim that names MIG is met only by a slice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro")
MIG_PROFILE = re.compile(r"^[1-8]g\.[0-9]+gb(\+me|\+gfx|\+me\.all)?$")


@dataclass(frozen=True)
class KnownGpu:
    name: str  # the name as NVML reports it
    family: str  # the model ('A100', 'RTX A1000', 'H100')
    variant: frozenset  # further words a claim may name (lower case): memory, form factor
    mig: str | None = None  # the MIG profile where the name is a slice ('1g.5gb'), else None


# name as reported -> (family, variant words). Every name here was checked against what NVML
# reports for that card; add a card by its exact reported name.
_TABLE: dict[str, tuple[str, tuple[str, ...]]] = {
    # Ampere data-centre
    "NVIDIA A100-SXM4-40GB": ("A100", ("sxm4", "40gb")),
    "NVIDIA A100-SXM4-80GB": ("A100", ("sxm4", "80gb")),
    "NVIDIA A100-PCIE-40GB": ("A100", ("pcie", "40gb")),
    "NVIDIA A100 80GB PCIe": ("A100", ("pcie", "80gb")),
    "NVIDIA A100-PCIE-80GB": ("A100", ("pcie", "80gb")),
    "NVIDIA A100X": ("A100X", ()),
    "NVIDIA A800-SXM4-80GB": ("A800", ("sxm4", "80gb")),
    "NVIDIA A800-SXM4-40GB": ("A800", ("sxm4", "40gb")),
    "NVIDIA A800 80GB PCIe": ("A800", ("pcie", "80gb")),
    "NVIDIA A800 40GB PCIe": ("A800", ("pcie", "40gb")),
    "NVIDIA A10": ("A10", ()),
    "NVIDIA A10G": ("A10G", ()),
    "NVIDIA A2": ("A2", ()),
    "NVIDIA A16": ("A16", ()),
    "NVIDIA A30": ("A30", ()),
    "NVIDIA A40": ("A40", ()),
    # Ampere workstation and laptop
    "NVIDIA RTX A1000 6GB Laptop GPU": ("RTX A1000", ("6gb", "laptop")),
    "NVIDIA RTX A1000 Laptop GPU": ("RTX A1000", ("4gb", "laptop")),
    "NVIDIA RTX A1000": ("RTX A1000", ("8gb",)),
    "NVIDIA RTX A2000": ("RTX A2000", ("6gb",)),
    "NVIDIA RTX A2000 12GB": ("RTX A2000", ("12gb",)),
    "NVIDIA RTX A4000": ("RTX A4000", ()),
    "NVIDIA RTX A5000": ("RTX A5000", ()),
    "NVIDIA RTX A6000": ("RTX A6000", ()),
    "NVIDIA GeForce RTX 3090": ("RTX 3090", ()),
    # Hopper, Ada, Blackwell
    "NVIDIA H100 80GB HBM3": ("H100", ("80gb", "hbm3", "sxm5")),
    "NVIDIA H100 PCIe": ("H100", ("pcie", "80gb")),
    "NVIDIA H100 NVL": ("H100", ("nvl", "94gb")),
    "NVIDIA H800": ("H800", ()),
    "NVIDIA H800 PCIe": ("H800", ("pcie",)),
    "NVIDIA H200": ("H200", ("141gb",)),
    "NVIDIA H200 NVL": ("H200", ("nvl", "141gb")),
    "NVIDIA H20": ("H20", ()),
    "NVIDIA GH200 480GB": ("GH200", ("480gb",)),
    "NVIDIA B200": ("B200", ()),
    "NVIDIA L4": ("L4", ()),
    "NVIDIA L40": ("L40", ()),
    "NVIDIA L40S": ("L40S", ()),
    "NVIDIA RTX 6000 Ada Generation": ("RTX 6000 Ada", ()),
    "NVIDIA GeForce RTX 4090": ("RTX 4090", ()),
    "NVIDIA GeForce RTX 4080": ("RTX 4080", ()),
    # older data-centre cards
    "Tesla V100-SXM2-16GB": ("V100", ("sxm2", "16gb")),
    "Tesla V100-SXM2-32GB": ("V100", ("sxm2", "32gb")),
    "Tesla V100-PCIE-16GB": ("V100", ("pcie", "16gb")),
    "Tesla V100-PCIE-32GB": ("V100", ("pcie", "32gb")),
    "Tesla T4": ("T4", ()),
    "Tesla P100-PCIE-16GB": ("P100", ("pcie", "16gb")),
}
# the cards whose NVML name gains ' MIG <profile>' on a MIG device
_MIG_CAPABLE = ("A100", "A800", "A30", "H100", "H800", "H200", "H20", "GH200", "B200")


def _key(name: str) -> str:
    return " ".join(name.split()).lower()


_BY_NAME = {_key(n): KnownGpu(n, fam, frozenset(var)) for n, (fam, var) in _TABLE.items()}
FAMILIES = frozenset(fam for fam, _ in _TABLE.values())


def lookup(name: str) -> KnownGpu | None:
    """The table's entry for one reported name (a MIG slice of a known card too), else None."""
    key = _key(name)
    if key in _BY_NAME:
        return _BY_NAME[key]
    parent, sep, profile = key.rpartition(" mig ")
    whole = _BY_NAME.get(parent) if sep else None
    if whole is not None and whole.family in _MIG_CAPABLE and MIG_PROFILE.match(profile):
        return KnownGpu(name, whole.family, whole.variant, mig=profile)
    return None


@dataclass(frozen=True)
class ClaimedGpu:
    family: str
    variant: frozenset  # further words the claim names (lower case)
    mig: bool  # the claim names MIG
    mig_profile: str | None


def read_claim(need: str) -> ClaimedGpu | None:
    """The claim's model as this table reads it (see the module's docstring), else None."""
    tokens = [t for t in re.split(r"[\s\-_/]+", str(need).strip()) if t]
    while tokens and tokens[0].lower() in VENDOR_WORDS:
        tokens = tokens[1:]
    families = {f.lower(): f for f in FAMILIES}
    for n in range(len(tokens), 0, -1):
        family = families.get(" ".join(tokens[:n]).lower())
        if family is None:
            continue
        rest = [t.lower() for t in tokens[n:]]
        mig = "mig" in rest
        profiles = [t for t in rest if MIG_PROFILE.match(t)]
        if len(profiles) > 1 or (profiles and not mig):
            return None
        variant = frozenset(t for t in rest if t != "mig" and t not in profiles)
        return ClaimedGpu(family, variant, mig, profiles[0] if profiles else None)
    return None


def meets(need, have) -> bool | None:
    """Whether every GPU of `have` (names joined by ', ') is the claimed model `need`, as the
    table reads them: True or False, or None where the table does not know the claim's model
    or one of the names (then nothing can be said from here)."""
    claim = read_claim(str(need))
    names = [n.strip() for n in str(have).split(",") if n.strip()]
    if claim is None or not names:
        return None
    known = [lookup(n) for n in names]
    if any(k is None for k in known):
        return None
    return all(_one_meets(claim, k) for k in known if k is not None)


def _one_meets(claim: ClaimedGpu, gpu: KnownGpu) -> bool:
    if gpu.family != claim.family:
        return False
    if claim.mig != (gpu.mig is not None):  # a slice is not the model; a MIG claim needs a slice
        return False
    if claim.mig_profile is not None and claim.mig_profile != gpu.mig:
        return False
    return claim.variant <= gpu.variant


def describe(have) -> str:
    """What the table reads in `have`: 'NVIDIA RTX A1000 6GB Laptop GPU: RTX A1000 (6gb, laptop)',
    a slice as '... : A100 (sxm4, 40gb), MIG slice 1g.5gb', a name it does not know as
    '...: not a name this table knows'."""
    out = []
    for n in [n.strip() for n in str(have).split(",") if n.strip()] or [str(have)]:
        k = lookup(n)
        if k is None:
            out.append(f"{n}: not a name the table of known GPUs holds")
            continue
        variant = f" ({', '.join(sorted(k.variant))})" if k.variant else ""
        out.append(f"{n}: {k.family}{variant}" + (f", MIG slice {k.mig}" if k.mig else ""))
    return "; ".join(dict.fromkeys(out))
