"""ember.cuda: whether CUDA is usable here, like torch.cuda. On the emulated build (-DEMBER_CUDA=EMULATED) cuda:N
is ember's emulated device on the CPU (is_emulated() is True): correct, never fast."""
from ._C.cuda import (  # noqa: F401
    is_available, device_count, is_emulated, unavailable_reason, get_device_name, synchronize,
)
