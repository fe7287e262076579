"""ember.optim: SGD and AdamW over module.parameters(), like torch.optim, and learning-rate schedules as functions
of the global step (optimizer.lr = schedule.lr_at(step) before each step)."""
from ._C.optim import (  # noqa: F401
    Optimizer, SGD, AdamW, LrSchedule, ConstantLr, StepLr, CosineLr,
)
