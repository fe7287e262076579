"""The byte-level BERT of `ember train --model bert` against PyTorch (Debian's python3-torch): its checkpoint loads
strictly into the peer's module (../shared/peers/torch_bert.py, restated below), and `ember predict` fills a text's
masked bytes with the bytes, and gives them the probabilities, that the peer's module does with those weights."""
import os
import re
import subprocess

import numpy as np

import ember


def peer_bert(torch, dim, depth, seq, heads=4):
    """The peer's module, names and forward unchanged (its width, depth and window as arguments)."""
    nn = torch.nn
    V = 257

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, dim)
            self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
            self.emb_norm = nn.LayerNorm(dim)
            self.drop = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, V))

        def forward(self, x):
            return self.head(self.encoder(self.drop(self.emb_norm(self.tok(x) + self.pos))))

    return Bert()


def test_bert_checkpoint_loads_strictly_into_the_peer_and_predicts_alike(torch, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.write_text("".join(f"the {w} fox number {i % 31} jumps over the lazy dog\n"
                              for i, w in enumerate(["quick", "brown", "red", "sly"] * 400)))
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(ember.__file__))), "apps", "ember")
    run = subprocess.run([cli, "train", "--model", "bert", "--device", "cpu", "--dim", "32", "--depth", "2",
                          "--feedforward", "128", "--seq-len", "16", "--batch-size", "16", "--steps", "150",
                          "--eval-every", "150", "--eval-batches", "4", "--lr", "3e-3", "--text", str(corpus),
                          "--quiet", "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    checkpoint = str(tmp_path / "run" / "model.safetensors")
    peer = peer_bert(torch, dim=32, depth=2, seq=16)
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in ember.load(checkpoint).items()}
    peer.load_state_dict(state, strict=True)
    peer.eval()

    text = "e qu[MASK]ck fox n_mb"  # 16 bytes once each mark is one: the peer's window
    predicted = subprocess.run([cli, "predict", "--device", "cpu", "--checkpoint", checkpoint, "--text", text,
                                "--mask-char", "_", "--top", "5"], capture_output=True, text=True, timeout=600)
    assert predicted.returncode == 0, predicted.stderr
    lines = predicted.stdout.splitlines()
    ids = [256 if c == "_" else ord(c) for c in text.replace("[MASK]", "_")]
    assert len(ids) == 16
    with torch.no_grad():
        probs = torch.softmax(peer(torch.tensor([ids]))[0].double(), -1)
    masked = [i for i, t in enumerate(ids) if t == 256]
    filled = list(ids)
    for i in masked:
        filled[i] = int(probs[i, :256].argmax())
    assert lines[0] == bytes(filled).decode("latin-1")
    assert lines[0] != text.replace("[MASK]", "_")  # something was filled
    for i, line in zip(masked, lines[1:]):
        assert line.startswith(f"byte {i}:")
        shown = [float(p) for p in re.findall(r"([0-9.]+)%", line)]
        expected = sorted(probs[i, :256].tolist(), reverse=True)[:5]
        np.testing.assert_allclose(shown, [100 * p for p in expected], atol=0.051)
    assert max(float(p) for p in re.findall(r"([0-9.]+)%", lines[1])) > 10  # it learned: a flat guess is 0.4%
