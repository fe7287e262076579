# Loads an ember model.safetensors into the matching torch.nn.Sequential with load_state_dict(strict=True) and
# checks that PyTorch predicts what ember predicts on the Fashion-MNIST test set: the confusion matrix of
# `ember eval --json` must equal PyTorch's, and `ember predict` must give PyTorch's probabilities.
# CI has no PyTorch; run it by hand (docs/checkpoints.md records the last run):
#   /usr/bin/python3 tests/data/torch/check_ember_checkpoint.py runs/cnn/model.safetensors build/apps/ember
import gzip, json, re, struct, subprocess, sys
import numpy as np
import torch

path, ember = sys.argv[1], sys.argv[2]
D = "/usr/share/datasets/fashion-mnist/"


def read_safetensors(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + n + a:8 + n + b], kinds[e["dtype"]]).reshape(e["shape"]).copy())
    return out, meta


def build(state):
    # conv blocks at 0, 4, ... then Flatten, then Linear layers every 3 (as ember's make_model lays them out).
    layers, i = [], 0
    while f"{i}.weight" in state and state[f"{i}.weight"].dim() == 4:
        oc, c, k, _ = state[f"{i}.weight"].shape
        layers += [torch.nn.Conv2d(c, oc, k, padding=k // 2), torch.nn.BatchNorm2d(oc), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        i += 4
    cnn = i > 0
    if cnn:
        layers.append(torch.nn.Flatten())
        i += 1
    while f"{i}.weight" in state:
        out_f, in_f = state[f"{i}.weight"].shape
        layers.append(torch.nn.Linear(in_f, out_f))
        if f"{i + (3 if cnn else 2)}.weight" in state:
            layers += [torch.nn.ReLU(), torch.nn.Dropout(0.25)] if cnn else [torch.nn.ReLU()]
        i += 3 if cnn else 2
    return torch.nn.Sequential(*layers), cnn


def idx(p):
    data = gzip.open(p).read()
    nd = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * nd).reshape(dims)


state, meta = read_safetensors(path)
model, cnn = build(state)
model.load_state_dict(state, strict=True)
model.eval()
x = torch.from_numpy(idx(D + "t10k-images-idx3-ubyte.gz").astype(np.float32) / 255)
x = x.reshape(-1, 1, 28, 28) if cnn else x.reshape(-1, 784)
y = torch.from_numpy(idx(D + "t10k-labels-idx1-ubyte.gz").astype(np.int64))
with torch.no_grad():
    probs = torch.softmax(model(x), 1)
pred = probs.argmax(1)
confusion = np.zeros((10, 10), np.int64)
np.add.at(confusion, (y.numpy(), pred.numpy()), 1)
ember_eval = json.loads(subprocess.run([ember, "eval", "--checkpoint", path, "--device", "cpu", "--json"],
                                       check=True, capture_output=True, text=True).stdout)
same = (np.array(ember_eval["confusion"]) == confusion).all()
print(f"{path} ({meta.get('ember_architecture', '?')}): strict load OK; PyTorch accuracy "
      f"{(pred == y).float().mean().item():.4f}, ember {ember_eval['accuracy']:.4f}; confusion matrices equal: {same}")
worst = 0.0
for i in range(0, 10000, 1999):
    out = subprocess.run([ember, "predict", "--checkpoint", path, "--device", "cpu", "--index", str(i)],
                         check=True, capture_output=True, text=True).stdout
    ember_probs = [float(v) / 100 for v in re.findall(r"^\s+\d \S+\s+([0-9.]+)%$", out, re.M)]
    worst = max(worst, max(abs(a - b) for a, b in zip(ember_probs, probs[i].tolist())))
print(f"ember predict vs PyTorch softmax on 6 images: max |difference| {worst:.2e} (printed to 0.01%)")
sys.exit(0 if same and worst < 1e-4 + 5e-5 else 1)
