"""Medusa (Cai et al., 2024): heads on the target's last hidden state and a fixed candidate tree."""

from specdec.proposers.medusa.batch import BatchMedusa, MedusaState
from specdec.proposers.medusa.heads import MedusaHeads
from specdec.proposers.medusa.proposer import TREE_FILE, Medusa

__all__ = ["TREE_FILE", "BatchMedusa", "Medusa", "MedusaHeads", "MedusaState"]
