#!/usr/bin/env python3
"""The device-placement lesson with ember: pick the device once, move the model once, move each batch inside the
loop, and see the error ember raises when a model and its input live on different devices.

Run from a build: PYTHONPATH=build/python /usr/bin/python3 examples/python/lesson.py [--steps N]
"""
import argparse

import ember

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
args = parser.parse_args()

# 1. One device-agnostic pick, used everywhere below.
device = ember.device(args.device or ("cuda" if ember.cuda.is_available() else "cpu"))
print(f"device: {device} (cuda available: {ember.cuda.is_available()}, devices: {ember.cuda.device_count()})")

# 2. A tensor is created on the host and copied to the device with .to(): a new tensor, the original stays.
x_host = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
x = x_host.to(device)
print("x_host on", x_host.device, "| x on", x.device)

# 3. A model moves in place: its parameters (and gradients and buffers) now live on `device`.
ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(2, 16), ember.nn.ReLU(), ember.nn.Linear(16, 1))
model.to(device)
print("model on", model.device)

# 4. The same-device rule: a model on one device and an input on another is an error, not a silent copy.
other = ember.device("meta") if device.type == "cpu" else ember.device("cpu")
try:
    model(ember.zeros(4, 2, device=other))
except ember.DeviceMismatchError as error:  # a RuntimeError, as in PyTorch
    print("caught DeviceMismatchError:", error)

# 5. Training: the model moved once (above); each batch is made on the host, as a data loader would, and moved
#    inside the loop. The target is y = 2*x0 - x1 + 0.5.
criterion = ember.nn.MSELoss()
optimizer = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
w = ember.tensor([[2.0], [-1.0]])
for step in range(args.steps):
    inputs_host = ember.rand(32, 2) * 2.0 - ember.ones(32, 2)
    targets_host = inputs_host @ w + ember.full((32, 1), 0.5)
    inputs, targets = inputs_host.to(device), targets_host.to(device)  # each batch, inside the loop
    loss = criterion(model(inputs), targets)
    optimizer.zero_grad()
    model.backward(criterion.backward())
    optimizer.step()
    if step % 50 == 0 or step == args.steps - 1:
        print(f"step {step:4d}  loss {loss.item():.5f}")  # .item() copies one number to the host
print(f"final loss {loss.item():.5f}")
