#!/usr/bin/env python3
"""Fashion-MNIST MLP (784-256-128-10) trained from Python with the recipe and seed of `ember train` (the same
weights, epoch order, optimizer and schedule, so the same accuracy), printing `ember train`'s epoch line.

Run from a build: PYTHONPATH=build/python /usr/bin/python3 examples/python/mlp_fashion.py [--epochs N] [--device D]
"""
import argparse
import time

import ember
from ember import nn

recipe = ember.train.defaults("mlp")  # every default of `ember train --model mlp`
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=recipe["epochs"])
parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
parser.add_argument("--data", default=recipe["data_dir"], help="the Fashion-MNIST IDX files")
parser.add_argument("--limit", type=int, default=recipe["limit"], help="first N training samples (-1: all)")
parser.add_argument("--threads", type=int, default=0, help="host threads for the CPU kernels (0: every core)")
args = parser.parse_args()
ember.set_num_threads(args.threads)
ember.set_flush_denormal(True)  # as `ember train` does unless --keep-denormals
device = ember.device(args.device or ("cuda" if ember.cuda.is_available() else "cpu"))

train_set = ember.data.load_fashion_mnist(args.data, "train", args.limit)
test_set = ember.data.load_fashion_mnist(args.data, "test")
loader = ember.data.DataLoader(train_set, recipe["batch_size"], recipe["shuffle"], seed=recipe["seed"],
                               device=device, sample_shape=[784])

# The network of `ember train`: drawn from the seeded generator in layer order, then fused (Linear+ReLU in one
# GEMM epilogue; state_dict names unchanged), moved once, and the first layer skips the input's gradient.
ember.manual_seed(recipe["seed"])
sizes = [784, *recipe["hidden"], 10]
layers = []
for i in range(len(sizes) - 1):
    layers.append(nn.Linear(sizes[i], sizes[i + 1]))
    if i < len(sizes) - 2:
        layers.append(nn.ReLU())
model = nn.Sequential(*layers)
nn.fuse(model)
model.to(device)
model.input_grad = False

steps_per_epoch = len(loader)
total = max(1, args.epochs * steps_per_epoch)
schedule = ember.optim.CosineLr(recipe["lr"], total, max(0, min(total - 1, int(recipe["warmup_epochs"] * steps_per_epoch))))
optimizer = ember.optim.SGD(model.parameters(), recipe["lr"], recipe["momentum"], 0, recipe["weight_decay"],
                            nesterov=recipe["nesterov"])
criterion = nn.CrossEntropyLoss()


def evaluate(dataset, batch_size=1000):
    model.eval()
    loss_sum = correct = 0.0
    for start in range(0, len(dataset), batch_size):
        images = dataset.images[start:start + batch_size]
        labels = dataset.labels[start:start + batch_size].to(device)
        logits = model(ember.data.images_to_input(images, [784], device))
        loss_sum += criterion(logits, labels).item() * len(labels)
        correct += ember.count_correct(logits, labels).item()
    model.train()
    return loss_sum / len(dataset), correct / len(dataset)


print(f"ember (Python): {'-'.join(map(str, sizes))} MLP on {device}, {len(train_set)} training / {len(test_set)} test "
      f"samples, batch {recipe['batch_size']}, sgd lr {recipe['lr']} (cosine)")
step = 0
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    losses, corrects, samples = [], [], 0
    for x, y in loader:  # each batch is already on `device`: the loader moves it
        optimizer.lr = schedule.lr_at(step)
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        losses.append(loss * float(len(y)))
        corrects.append(ember.count_correct(logits, y))
        model.backward(criterion.backward())
        optimizer.step()
        samples += len(y)
        step += 1
    train_loss = sum(t.item() for t in losses) / samples  # read once per epoch, as `ember train` does
    train_acc = sum(t.item() for t in corrects) / samples
    if device.type == "cuda":
        ember.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    test_loss, test_acc = evaluate(test_set)
    print(f"epoch {epoch}/{args.epochs}  train loss {train_loss:.4f} acc {100 * train_acc:.2f}%  test loss "
          f"{test_loss:.4f} acc {100 * test_acc:.2f}%  lr {optimizer.lr:.4g}  {seconds:.1f} s  "
          f"{samples / seconds:.0f} samples/s", flush=True)
