"""What people look at: a run's report, the leaderboard against the paper's Table 3, a sweep's summary and the ablation
report with its verdicts. Above the evaluation runners, below the pipeline."""
