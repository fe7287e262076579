"""DLPack both ways with PyTorch and NumPy: zero-copy, shared writes, lifetimes, and every refusal."""
import gc
import sys

import numpy as np
import pytest

import ember

DTYPES = [("float32", ember.float32), ("float64", ember.float64), ("int32", ember.int32), ("int64", ember.int64),
          ("uint8", ember.uint8)]


@pytest.mark.parametrize("name,dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (5,), (2, 3, 4)])
def test_numpy_round_trip_keeps_shape_dtype_values_and_memory(name, dtype, shape):
    a = (np.arange(int(np.prod(shape))) % 7).astype(name).reshape(shape)
    t = ember.from_dlpack(a)
    assert t.shape == shape and t.dtype == dtype
    assert np.array_equal(t.numpy(), a)
    back = np.from_dlpack(t)
    assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a)
    if a.size:
        assert t.data_ptr() == a.ctypes.data == back.ctypes.data  # one buffer, three views


@pytest.mark.parametrize("name", ["float32", "float64", "int32", "int64", "uint8"])
def test_torch_round_trip_both_ways(torch, name):
    x = torch.arange(24).to(getattr(torch, name)).reshape(2, 3, 4)
    t = ember.from_dlpack(x)
    assert t.shape == (2, 3, 4) and str(t.dtype) == "ember." + name
    assert t.data_ptr() == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.dtype == x.dtype and torch.equal(x, y) and y.data_ptr() == x.data_ptr()


def test_writes_are_seen_on_both_sides(torch):
    x = torch.zeros(4)
    t = ember.from_dlpack(x)
    x[1] = 3
    t[2].fill_(5)
    assert t.tolist() == [0.0, 3.0, 5.0, 0.0] and x.tolist() == [0.0, 3.0, 5.0, 0.0]
    e = ember.zeros(3)
    y = torch.from_dlpack(e)
    y += 1
    assert e.tolist() == [1.0, 1.0, 1.0]


def test_strided_views_are_shared_with_their_strides(torch):
    base = torch.arange(20.0).reshape(4, 5)
    for view in (base[:, 1::2], base.t(), base[1:3, 2:], base[::2]):
        t = ember.from_dlpack(view)
        assert t.stride() == view.stride() and t.shape == tuple(view.shape)
        assert np.array_equal(t.contiguous().numpy(), view.numpy())
        back = torch.from_dlpack(t)
        assert back.stride() == view.stride() and torch.equal(back, view)
    e = ember.arange(20).view([4, 5])[1:, ::2]
    n = np.from_dlpack(e)
    assert n.strides == (20, 8) and np.array_equal(n, np.arange(20.0, dtype=np.float32).reshape(4, 5)[1:, ::2])
    y = torch.from_dlpack(e.t())
    y[0, 0] = -1  # writes through the strided view land in ember's storage
    assert e.tolist()[0][0] == -1.0


def test_the_producer_may_die_first(torch):
    x = torch.arange(6.0)
    t = ember.from_dlpack(x)
    del x
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    e = ember.arange(4)
    y, n = torch.from_dlpack(e), np.from_dlpack(e)
    del e
    gc.collect()
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0] and n.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_ember_calls_the_producers_deleter_when_its_storage_dies():
    a = np.arange(4.0)
    t = ember.from_dlpack(a)
    view = t[1:]
    refs = sys.getrefcount(a)
    del t
    assert sys.getrefcount(a) == refs  # the view holds the storage
    del view
    assert sys.getrefcount(a) == refs - 1  # the last view gone: numpy's deleter released the array


def test_capsules_are_renamed_and_consumed_once(torch):
    capsule = ember.arange(3).__dlpack__()
    t = ember.from_dlpack(capsule)
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert "used_dltensor" in repr(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        ember.from_dlpack(capsule)
    capsule = torch.utils.dlpack.to_dlpack(torch.ones(2))
    ember.from_dlpack(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        ember.from_dlpack(capsule)
    a = np.arange(3.0)
    t = ember.from_dlpack(a)
    refs = sys.getrefcount(a)
    unused = t.__dlpack__()
    del t
    assert sys.getrefcount(a) == refs  # the capsule's tensor holds the storage, which holds numpy's array
    del unused  # an unconsumed capsule frees its context itself: the last holder of the storage
    assert sys.getrefcount(a) == refs - 1


def test_refusals_say_what_and_how(torch):
    with pytest.raises(TypeError, match="bool"):
        ember.from_dlpack(torch.tensor([True, False]))
    with pytest.raises((TypeError, BufferError), match="bool|DLPack"):
        ember.from_dlpack(np.array([True, False]))
    with pytest.raises(TypeError, match="bfloat16|bfloat"):
        ember.from_dlpack(torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="float16"):
        ember.from_dlpack(torch.ones(2, dtype=torch.float16))
    with pytest.raises(TypeError, match="complex"):
        ember.from_dlpack(torch.ones(2, dtype=torch.complex64))
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        ember.from_dlpack(ro)
    with pytest.raises(BufferError, match="negative strides"):
        ember.from_dlpack(np.arange(4.0)[::-1])
    with pytest.raises(TypeError, match="__dlpack__"):
        ember.from_dlpack([1, 2])
    with pytest.raises(BufferError, match="stream=None"):
        ember.zeros(2).__dlpack__(stream=1)
    with pytest.raises(BufferError, match="move it"):
        ember.zeros(2).__dlpack__(dl_device=(2, 0))


def test_newer_keywords_are_accepted():
    t = ember.arange(3)
    assert t.__dlpack_device__() == (1, 0)
    shared = ember.from_dlpack(t.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False))
    copied = ember.from_dlpack(t.__dlpack__(copy=True))
    t.fill_(9)
    assert shared.tolist() == [9.0] * 3 and copied.tolist() == [0.0, 1.0, 2.0]
