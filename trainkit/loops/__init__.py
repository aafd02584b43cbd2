"""The loops: fit, evaluation and predict, the optimizer step, preemption and the run state."""
