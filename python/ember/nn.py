"""ember.nn: modules with an explicit backward, and losses, like torch.nn.

The gradient contract (nn/module.h): module(x) keeps what backward needs; module.backward(grad_output) returns the
gradient w.r.t. that input and ADDS the parameters' gradients (zero_grad() clears them). A loss's backward()
returns the gradient w.r.t. its input. One step:

    logits = model(x); loss = criterion(logits, y)
    optimizer.zero_grad(); model.backward(criterion.backward()); optimizer.step()
"""
from ._C.nn import (  # noqa: F401
    Parameter, Module, Sequential, Linear, LinearReLU, Identity, ReLU, Flatten, Dropout, Conv2d, BatchNorm2d,
    BatchNormReLU, BatchNormReLUPool, MaxPool2d, CrossEntropyLoss, MSELoss, fuse, LayerNorm, GELU, MultiheadAttention,
    TransformerEncoderLayer, TransformerEncoder,
)
