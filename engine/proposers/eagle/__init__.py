"""EAGLE (Li et al., 2024): one trained layer that drafts the target's next feature, a dynamic tree."""

from .decode import EagleDecoder
from .layer import KV, EagleLayer
from .proposer import Eagle

__all__ = ["Eagle", "EagleDecoder", "EagleLayer", "KV"]
