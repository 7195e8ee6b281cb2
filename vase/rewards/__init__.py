"""Verifiable rewards: the six-dimension similarity reward with threshold tau, penalties and bonus."""

from vase.rewards.extract import extract_fields
from vase.rewards.reward import PAPER_WEIGHTS, RewardOutput, VaseReward

__all__ = ["PAPER_WEIGHTS", "RewardOutput", "VaseReward", "extract_fields"]
