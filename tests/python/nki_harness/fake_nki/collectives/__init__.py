"""`nki.collectives` (`ncc`): collectives between the ranks of a launch.

See `groups.py` for how programs rendezvous; the semantic choices the docs
leave open (member order, reduction order) are in SEMANTICS.md.
"""

from dataclasses import dataclass
from enum import Enum

from ..objects import NKIObject
from ..tensor import NkiTensor
from .dense import all_gather, all_reduce, all_to_all, rank_id, reduce_scatter
from .groups import ReplicaGroup
from .permute import (collective_permute, collective_permute_implicit,
                      collective_permute_implicit_current_processing_rank_id, collective_permute_implicit_reduce)
from .variable import all_gather_v, all_to_all_v

__all__ = ["Enum", "dataclass", "NKIObject", "NkiTensor", "ReplicaGroup", "all_gather", "all_gather_v",
           "all_reduce", "all_to_all", "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_current_processing_rank_id", "collective_permute_implicit_reduce",
           "rank_id", "reduce_scatter"]
