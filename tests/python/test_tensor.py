"""Tensors from Python: factories, properties, views, values, operators and the errors they raise."""
import numpy as np
import pytest

import ember


def test_tensor_from_lists_and_arrays_keeps_values_and_picks_pytorchs_dtypes():
    t = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.shape == (2, 2) and t.dtype == ember.float32 and t.device == ember.device("cpu")
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert ember.tensor([1, 2]).dtype == ember.int64
    assert ember.tensor(np.zeros(3, dtype=np.float64)).dtype == ember.float64
    assert ember.tensor([1, 2], dtype=ember.uint8).numpy().dtype == np.uint8
    assert ember.tensor(3.5).shape == () and ember.tensor(3.5).item() == 3.5
    assert ember.tensor(2**62 + 1).item() == 2**62 + 1  # int64 exactly, beyond a double's 53 bits


def test_factories_and_seeded_random():
    assert ember.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert ember.ones((2,), dtype=ember.int32).tolist() == [1, 1]
    assert ember.arange(4).tolist() == [0.0, 1.0, 2.0, 3.0]
    ember.manual_seed(7)
    a = ember.randn(100)
    ember.manual_seed(7)
    assert np.array_equal(a.numpy(), ember.randn(100).numpy())
    assert not np.array_equal(a.numpy(), ember.randn(100).numpy())  # the generator moved on
    assert abs(float(a.numpy().mean())) < 0.5


def test_views_share_storage_and_indexing_follows_python():
    t = ember.arange(12).view([3, 4])
    assert t[1].tolist() == [4.0, 5.0, 6.0, 7.0]
    assert t[:, 1].tolist() == [1.0, 5.0, 9.0]
    assert t[-1, 1:4:2].tolist() == [9.0, 11.0]
    assert t[1:, ::3].stride() == (4, 3)
    assert t.t().shape == (4, 3) and not t.t().is_contiguous()
    t[0].fill_(-1)
    assert t.tolist()[0] == [-1.0] * 4
    with pytest.raises(ValueError):
        t[::-1]
    with pytest.raises(TypeError):
        t["a"]


def test_numpy_shares_the_tensors_memory_and_outlives_it():
    t = ember.zeros(3)
    a = t.numpy()
    a[1] = 5
    assert t.tolist() == [0.0, 5.0, 0.0]
    del t
    assert a.tolist() == [0.0, 5.0, 0.0]  # the array holds the storage


def test_operators_and_ops():
    a, b = ember.tensor([[1.0, 2.0], [3.0, 4.0]]), ember.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert (a + b).tolist() == [[2.0, 2.0], [3.0, 5.0]]
    assert (a - b).tolist() == [[0.0, 2.0], [3.0, 3.0]]
    assert (a * b).tolist() == [[1.0, 0.0], [0.0, 4.0]]
    assert (2.0 * a / 4.0).tolist() == [[0.5, 1.0], [1.5, 2.0]]
    assert (a @ b).tolist() == a.tolist()
    assert (-a).relu().sum().item() == 0.0
    assert a.mean().item() == 2.5
    assert a.argmax().tolist() == [1, 1]
    assert np.allclose(a.softmax(-1).numpy(), np.exp(a.numpy()) / np.exp(a.numpy()).sum(1, keepdims=True))
    assert "shape=[2, 2], dtype=float32, device=cpu" in repr(a)
    assert repr(ember.float32) == "ember.float32" and str(ember.device("cuda:1")) == "cuda:1"


def test_errors_are_python_exceptions_with_embers_message():
    with pytest.raises(ember.DeviceMismatchError, match="Expected all tensors to be on the same device") as e:
        ember.zeros(2) + ember.zeros(2, device="meta")
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(ValueError, match="inner dimensions differ"):  # ember.ShapeError
        ember.zeros(2, 3) @ ember.zeros(2, 3)
    with pytest.raises(ember.ShapeError):
        ember.zeros(2, 3).view([4])
    with pytest.raises(TypeError):  # ember.DTypeError
        ember.zeros(2, dtype=ember.int32).softmax()
    with pytest.raises(ValueError):
        ember.device("gpu")
    with pytest.raises(TypeError, match="no dtype for bool"):
        ember.tensor([True, False])
    with pytest.raises(ValueError, match="one element"):
        ember.zeros(2).item()


@pytest.mark.skipif(ember.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_is_refused_cleanly_without_a_device():
    assert ember.cuda.device_count() == 0
    with pytest.raises(ember.DeviceUnavailableError, match="cuda"):
        ember.zeros(2).to("cuda")


def test_host_settings_under_pytorchs_names():
    threads = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1
        with pytest.raises(ValueError, match="thread"):
            ember.set_num_threads(-1)
    finally:
        ember.set_num_threads(threads)
    tiny = ember.tensor([1e-40])  # a denormal float32
    try:
        assert ember.set_flush_denormal(True)
        assert (tiny * 2.0).item() == 0.0
        ember.set_flush_denormal(False)
        assert (tiny * 2.0).item() > 0.0
    finally:
        ember.set_flush_denormal(False)
