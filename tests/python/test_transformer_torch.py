"""ember's Transformer layers against torch.nn's (Debian's python3-torch), weights passed through a safetensors file
that PyTorch's side writes: TransformerEncoderLayer outputs and every gradient (input and parameters) for both
norm_first settings, ReLU and GELU, with and without a causal mask and a key padding mask; then the ViT of
`ember train --model vit`: its checkpoint loads strictly into the peer's PyTorch module
(../shared/peers/torch_vit.py, restated below) and gives the same test predictions."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

import ember


def write_safetensors(path, tensors):
    """The safetensors layout (an 8-byte header length, a JSON header, raw little-endian data), written by hand so
    that nothing of ember's touches the file."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().astype("<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def as_numpy(t):
    return np.asarray(t.numpy())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
@pytest.mark.parametrize("causal,padding", [(False, False), (True, False), (False, True), (True, True)])
def test_encoder_layer_matches_torch(torch, tmp_path, norm_first, activation, causal, padding):
    torch.manual_seed(0)
    d, heads, ff, b, t = 16, 4, 24, 3, 7
    ref = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first).double()
    with torch.no_grad():  # off the initial values: zero biases and unit norms would hide a missing term
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = tmp_path / "layer.safetensors"
    write_safetensors(path, ref.state_dict())
    mine = ember.nn.TransformerEncoderLayer(d, heads, ff, 0.0, activation, 1e-5, True, norm_first, dtype=ember.float64)
    mine.load_state_dict(ember.load(path))

    x = torch.randn(b, t, d, dtype=torch.float64, requires_grad=True)
    pad = torch.zeros(b, t, dtype=torch.bool)
    if padding:
        pad[0, -2:] = True  # sequence 0 ignores its last two keys
        pad[2, -1] = True  # (key 0 masked under causal would leave query 0 nothing: PyTorch gives NaN there)
    kwargs = {"src_key_padding_mask": pad if padding else None}
    if causal:
        # The causal mask as an additive float mask (-inf above the diagonal): every torch version takes it.
        kwargs["src_mask"] = torch.triu(torch.full((t, t), float("-inf"), dtype=torch.float64), 1)
    y = ref(x, **kwargs)
    dy = torch.randn_like(y)
    y.backward(dy)

    out = mine(ember.tensor(x.detach().numpy()),
               src_key_padding_mask=ember.tensor(pad.numpy().astype(np.uint8)) if padding else None, is_causal=causal)
    np.testing.assert_allclose(as_numpy(out), y.detach().numpy(), rtol=1e-9, atol=1e-10)
    mine.zero_grad()
    dx = mine.backward(ember.tensor(dy.numpy()))
    np.testing.assert_allclose(as_numpy(dx), x.grad.numpy(), rtol=1e-8, atol=1e-10)
    grads = dict(mine.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(as_numpy(grads[name].grad), p.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)


def peer_vit(torch, patch=7, dim=64, depth=4, heads=4, ff=128):
    """The peer's module (../shared/peers/torch_vit.py), names and forward unchanged."""
    nn = torch.nn
    n_patch = (28 // patch) ** 2

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Linear(patch * patch, dim)
            self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embedding = nn.Parameter(torch.randn(1, n_patch + 1, dim) * 0.02)
            layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout=0.1, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, 10)

        def forward(self, x):
            b = x.shape[0]
            x = x.unfold(2, patch, patch).unfold(3, patch, patch).reshape(b, n_patch, patch * patch)
            x = torch.cat([self.class_token.expand(b, -1, -1), self.patch_embed(x)], 1) + self.pos_embedding
            return self.head(self.norm(self.encoder(x)[:, 0]))

    return ViT()


def test_vit_checkpoint_loads_strictly_into_the_peer_with_the_same_accuracy(torch, tmp_path):
    data = ember.train.defaults("vit")["data_dir"]
    if not os.path.isdir(data):
        pytest.skip(f"no Fashion-MNIST at {data} (Debian's dataset-fashion-mnist)")
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(ember.__file__))), "apps", "ember")
    run = subprocess.run([cli, "train", "--model", "vit", "--device", "cpu", "--epochs", "1", "--limit", "1024",
                          "--dim", "32", "--depth", "2", "--feedforward", "48", "--quiet", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, env=os.environ)
    assert run.returncode == 0, run.stderr
    checkpoint = str(tmp_path / "model.safetensors")
    peer = peer_vit(torch, dim=32, depth=2, ff=48)
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in ember.load(checkpoint).items()}
    peer.load_state_dict(state, strict=True)
    peer.eval()

    test = ember.data.load_fashion_mnist(data, "test")
    images = torch.from_numpy(np.array(test.images.numpy())).float().div(255).reshape(-1, 1, 28, 28)
    labels = torch.from_numpy(np.array(test.labels.numpy()))
    with torch.no_grad():
        x = (images - 0.2860) / 0.3530
        predicted = torch.cat([peer(x[k:k + 1000]).argmax(1) for k in range(0, len(x), 1000)])
    torch_accuracy = (predicted == labels).double().mean().item()
    ev = subprocess.run([cli, "eval", "--checkpoint", checkpoint, "--device", "cpu", "--json"], capture_output=True,
                        text=True, timeout=600, env=os.environ)
    assert ev.returncode == 0, ev.stderr
    ember_accuracy = json.loads(ev.stdout)["accuracy"]
    assert 0.3 < ember_accuracy  # it learned something: the comparison below is not between two constant guesses
    assert abs(torch_accuracy - ember_accuracy) <= 2e-4, (torch_accuracy, ember_accuracy)  # at most 2 of 10000
