"""Tasks: what is specific to each thing a model is asked (its prompt, its answer, how an answer is parsed and
compared), below data, rewards and evaluation, which all use the same task code."""
