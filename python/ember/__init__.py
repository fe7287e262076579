"""ember: a from-scratch tensor engine, from Python.

Names and argument orders follow PyTorch where the concept is the same, so code written for torch's device
placement runs with `import ember as torch`-like edits. The engine is the compiled ember._C (like torch._C); this
package re-exports it and adds no logic beyond argument shapes (docs/usage.md, "Python").
"""
from . import _C
from ._C import (  # noqa: F401
    Tensor, device, dtype, float32, float64, int32, int64, uint8, float, double, int, long,
    Error, DeviceMismatchError, ShapeError, DTypeError, InvalidValueError, OutOfMemoryError, CudaError,
    DeviceUnavailableError, IoError, FormatError, NumericalError, InternalError,
    from_dlpack, manual_seed, initial_seed, arange, set_num_threads, get_num_threads, set_flush_denormal,
    add, sub, mul, matmul, relu, sum, mean, argmax, softmax, log_softmax, count_correct, cross_entropy, linear,
)
from ._C import train  # noqa: F401,E402
from . import cuda, nn, optim, data  # noqa: F401,E402

__all__ = [name for name in dir() if not name.startswith("_")]


def _size(size):
    """zeros(2, 3) and zeros((2, 3)) alike, as PyTorch takes them."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return list(size[0])
    return list(size)


def zeros(*size, dtype=None, device=None):
    return _C._full(_size(size), 0, dtype, device)


def ones(*size, dtype=None, device=None):
    return _C._full(_size(size), 1, dtype, device)


def full(size, fill_value, *, dtype=None, device=None):
    return _C._full(list(size), fill_value, dtype, device)


def empty(*size, dtype=None, device=None):
    return _C._empty(_size(size), dtype, device)


def randn(*size, dtype=None, device=None):
    """Normal(0, 1) from the default generator (ember.manual_seed): the same values on cpu and cuda."""
    return _C._random(_size(size), True, dtype, device)


def rand(*size, dtype=None, device=None):
    """Uniform [0, 1) from the default generator."""
    return _C._random(_size(size), False, dtype, device)


_FROM_NUMPY = {"float32": float32, "float64": float64, "int32": int32, "int64": int64, "uint8": uint8}


def tensor(data, dtype=None, device=None):
    """A new tensor holding a copy of `data` (a nested list, a number, a NumPy array or a tensor).

    As in PyTorch, Python floats become float32 and Python ints int64; an array keeps its dtype."""
    import numpy

    if isinstance(data, Tensor):
        data = data.cpu().numpy()
    array = numpy.asarray(data)
    if dtype is None and not isinstance(data, numpy.ndarray) and array.dtype == numpy.float64:
        dtype = float32
    if dtype is not None:
        array = array.astype(str(dtype).split(".")[-1], copy=False)
    elif str(array.dtype) not in _FROM_NUMPY:
        raise TypeError(f"ember.tensor: ember has no dtype for {array.dtype} (it has float32, float64, int32, int64, "
                        "uint8); pass dtype=")
    return _C._from_numpy_copy(array, device)


def from_numpy(array):
    """A tensor sharing the memory of a writeable NumPy array (zero-copy, through DLPack)."""
    return from_dlpack(array)


def save(obj, path, metadata=None):
    """Writes a state_dict (name -> Tensor) or a module's state_dict as safetensors, atomically.

    A module's file carries {"format": "pt"}, so PyTorch's safetensors loader and `ember eval` take it."""
    if isinstance(obj, nn.Module):
        obj = obj.state_dict()
        metadata = {"format": "pt", **(metadata or {})}
    if not isinstance(obj, dict):
        raise TypeError(f"ember.save takes a dict of name -> Tensor or an ember.nn.Module, got {type(obj).__name__}")
    _C._save(obj, str(path), metadata or {})


def load(path, map_location=None, *, with_metadata=False):
    """Reads a safetensors file as an ordered dict name -> Tensor (on map_location, cpu by default)."""
    tensors, metadata = _C._load(str(path), map_location)
    return (tensors, metadata) if with_metadata else tensors
