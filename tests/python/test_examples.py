"""The examples as tests (the lesson; the MLP against `ember train`), and the .to("cuda") cases (run on a GPU or the emulated device, skipped elsewhere)."""
import os
import re
import subprocess

import numpy as np
import pytest

import ember
from conftest import REPO, requires_cuda


def test_lesson_runs_and_learns(python):
    out = subprocess.run([python, os.path.join(REPO, "examples/python/lesson.py"), "--steps", "120"],
                         capture_output=True, text=True, timeout=120, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert "caught DeviceMismatchError: Expected all tensors to be on the same device" in out.stdout
    final = float(out.stdout.strip().splitlines()[-1].split()[-1])
    assert final < 0.01, out.stdout


EPOCH_LINE = re.compile(r"^epoch 1/1 +train loss \S+ acc \S+ +test loss \S+ acc \S+", re.M)


def test_the_python_mlp_trains_exactly_as_ember_train(python, tmp_path):
    data = ember.train.defaults("mlp")["data_dir"]
    if not os.path.isdir(data):
        pytest.skip(f"no Fashion-MNIST at {data} (Debian's dataset-fashion-mnist)")
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(ember.__file__))), "apps", "ember")
    common = ["--device", "cpu", "--epochs", "1", "--limit", "2000"]
    runs = [subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ)
            for cmd in ([cli, "train", *common, "--out", str(tmp_path)],
                        [python, os.path.join(REPO, "examples/python/mlp_fashion.py"), *common])]
    for run in runs:
        assert run.returncode == 0, run.stderr
    lines = [EPOCH_LINE.search(run.stdout) for run in runs]
    assert all(lines), [run.stdout for run in runs]
    assert lines[0].group(0) == lines[1].group(0)  # the same losses and accuracies, to the last printed digit


@requires_cuda
def test_to_cuda_and_back():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x.to("cuda")
    assert y.device == ember.device("cuda:0") and y.is_cuda and x.device.type == "cpu"
    assert (y @ y).cpu().tolist() == [[7.0, 10.0], [15.0, 22.0]]
    with pytest.raises(ValueError, match="cpu"):
        y.numpy()
    with pytest.raises(ember.DeviceMismatchError, match="Expected all tensors to be on the same device"):
        x + y


@requires_cuda
def test_model_on_cuda_matches_cpu_and_refuses_host_input():
    ember.manual_seed(3)
    model = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU(), ember.nn.Linear(3, 2))
    x = ember.randn(5, 4)
    expected = model(x).numpy()
    model.to(ember.device("cuda"))
    assert all(p.device.type == "cuda" for p in model.parameters())
    np.testing.assert_allclose(model(x.to("cuda")).cpu().numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ember.DeviceMismatchError, match="Move the input"):
        model(x)


@requires_cuda
def test_dlpack_of_cuda_tensors_keeps_the_device():
    t = ember.arange(6).to("cuda")
    assert t.__dlpack_device__() == (2, 0)
    back = ember.from_dlpack(t)  # ember's own CUDA capsule, with ember's compute stream as the consumer's
    assert back.device == ember.device("cuda:0") and back.data_ptr() == t.data_ptr()
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 0))
