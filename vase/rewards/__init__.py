"""Verifiable rewards: the six-dimension similarity reward with threshold tau, penalties and bonus."""

from vase.rewards.extract import extract_fields
from vase.rewards.reward import RewardOutput, VaseReward, reward_from_config

__all__ = ["RewardOutput", "VaseReward", "extract_fields", "reward_from_config"]
