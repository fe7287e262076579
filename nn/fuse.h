// fuse(): the explicit pass that turns a user's Sequential into its fused form, as torch.ao's fuse_modules does:
// each Linear followed by a ReLU becomes a LinearReLU, each BatchNorm2d followed by a ReLU a
// BatchNormReLU, and the ReLU's place an Identity; then each BatchNormReLU followed by a MaxPool2d becomes a
// BatchNormReLUPool, and the pool's place an Identity. So the state_dict keeps PyTorch's names ("0.weight",
// "2.weight", ...). The fused modules share the originals' Parameters: outputs and gradients stay the same, and an
// optimizer built before the pass keeps updating the model.
#pragma once

#include "nn/container.h"

namespace ember::nn {

// Fuses among `model`'s children (not inside nested containers) and returns how many fusions it made (a
// BatchNorm2d, ReLU and MaxPool2d: two).
int fuse(Sequential& model);

}  // namespace ember::nn
