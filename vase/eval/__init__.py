"""Evaluation runners: generation, VQA, scoring, VaseEval, inverse rendering as an evaluation, leaderboard and sweep reports."""
