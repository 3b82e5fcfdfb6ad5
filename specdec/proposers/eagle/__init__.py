"""EAGLE (Li et al., 2024): one trained layer that drafts the target's next feature, a dynamic tree."""

from specdec.proposers.eagle.decode import EagleDecoder
from specdec.proposers.eagle.layer import KV, EagleLayer
from specdec.proposers.eagle.proposer import Eagle
from specdec.proposers.eagle.state import EagleState

__all__ = ["KV", "Eagle", "EagleDecoder", "EagleLayer", "EagleState"]
