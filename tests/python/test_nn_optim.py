"""Modules, losses and optimizers against PyTorch on the same weights (copied through DLPack and state_dict)."""
import numpy as np
import pytest

import ember
from ember import nn


def to_torch(torch, t):
    return torch.from_dlpack(t).clone()


def copy_weights(torch, ember_model, torch_model):
    torch_model.load_state_dict({k: to_torch(torch, v) for k, v in ember_model.state_dict().items()})


def close(torch, ember_tensor, torch_tensor, tol=1e-4):
    np.testing.assert_allclose(ember_tensor.numpy(), torch_tensor.detach().numpy(), rtol=tol, atol=tol)


def mlp():
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def cnn():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16, 3))


def torch_twin(torch, kind):
    T = torch.nn
    if kind == "mlp":
        return T.Sequential(T.Linear(6, 5), T.ReLU(), T.Linear(5, 3))
    return T.Sequential(T.Conv2d(2, 4, 3, padding=1), T.BatchNorm2d(4), T.ReLU(), T.MaxPool2d(2), T.Flatten(),
                        T.Linear(16, 3))


@pytest.mark.parametrize("kind,shape", [("mlp", (8, 6)), ("cnn", (5, 2, 4, 4))])
@pytest.mark.parametrize("fused", [False, True])
def test_forward_and_backward_match_pytorch(torch, kind, shape, fused):
    ember.manual_seed(1)
    model = mlp() if kind == "mlp" else cnn()
    if fused:  # the CNN's BatchNorm2d, ReLU and MaxPool2d: two fusions, one BatchNormReLUPool
        assert nn.fuse(model) == (1 if kind == "mlp" else 2)
        assert kind == "mlp" or type(model[1]) is nn.BatchNormReLUPool
    twin = torch_twin(torch, kind)
    copy_weights(torch, model, twin)
    x = ember.randn(*shape)
    labels = ember.tensor([0, 2, 1, 1, 0, 2, 2, 1][: shape[0]])
    criterion = nn.CrossEntropyLoss()
    loss = criterion(model(x), labels)
    xt = to_torch(torch, x).requires_grad_()
    tloss = torch.nn.functional.cross_entropy(twin(xt), to_torch(torch, labels))
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
    model.zero_grad()
    grad_x = model.backward(criterion.backward())
    tloss.backward()
    close(torch, grad_x, xt.grad)
    grads = dict(twin.named_parameters())
    for name, p in model.named_parameters():
        close(torch, p.grad, grads[name].grad)
    if kind == "cnn":  # the running statistics moved alike
        close(torch, model.state_dict()["1.running_var"], twin[1].running_var)


def test_backward_accumulates_and_zero_grad_clears():
    model, criterion = mlp(), nn.MSELoss()
    x, y = ember.randn(4, 6), ember.randn(4, 3)
    for _ in range(2):
        criterion(model(x), y)
        model.backward(criterion.backward())
    once = model.parameters()[0].grad.numpy().copy()
    model.zero_grad()
    criterion(model(x), y)
    model.backward(criterion.backward())
    np.testing.assert_allclose(once, 2 * model.parameters()[0].grad.numpy(), rtol=1e-5)
    model.zero_grad()
    assert not model.parameters()[0].grad.numpy().any()


@pytest.mark.parametrize("make", [
    lambda e, ps: e.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-2, nesterov=True),
    lambda e, ps: e.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
], ids=["sgd-nesterov", "adamw"])
def test_optimizer_steps_match_torch_optim(torch, make):
    model, twin = mlp(), torch_twin(torch, "mlp")
    copy_weights(torch, model, twin)
    opt, topt = make(ember, model.parameters()), make(torch, twin.parameters())
    criterion = nn.MSELoss()
    for step in range(3):
        x, y = ember.randn(4, 6), ember.randn(4, 3)
        criterion(model(x), y)
        opt.zero_grad()
        model.backward(criterion.backward())
        opt.step()
        topt.zero_grad()
        torch.nn.functional.mse_loss(twin(to_torch(torch, x)), to_torch(torch, y)).backward()
        topt.step()
    for name, t in twin.state_dict().items():
        close(torch, model.state_dict()[name], t, 1e-5)


def test_state_dict_save_and_load(tmp_path):
    model = cnn()
    state = model.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                           "1.num_batches_tracked", "5.weight", "5.bias"]
    ember.save(model, tmp_path / "m.safetensors")
    loaded, meta = ember.load(tmp_path / "m.safetensors", with_metadata=True)
    assert meta == {"format": "pt"} and list(loaded) == list(state)
    other = cnn()
    other.load_state_dict(loaded)
    x = ember.randn(2, 2, 4, 4)
    model.eval(), other.eval()
    assert np.array_equal(model(x).numpy(), other(x).numpy())
    with pytest.raises(ValueError, match="missing"):
        other.load_state_dict({"0.weight": loaded["0.weight"]})
    other.load_state_dict({"0.weight": loaded["0.weight"]}, strict=False)
    with pytest.raises(OSError):
        ember.load(tmp_path / "absent.safetensors")


def test_module_surface():
    model = mlp()
    assert model.training and not model.eval().training and model.train().training
    assert len(model) == 3 and isinstance(model[0], nn.Linear) and isinstance(model[-1], nn.Linear)
    assert model[0].weight.shape == (5, 6) and model.num_parameters() == 6 * 5 + 5 + 5 * 3 + 3
    assert model.to("cpu") is model and model.device == ember.device("cpu")
    assert "(1): ReLU()" in repr(model)
    with pytest.raises(ember.ShapeError):
        model(ember.zeros(2, 7))
    with pytest.raises(ValueError, match="forward"):
        nn.Linear(2, 2).backward(ember.zeros(1, 2))
