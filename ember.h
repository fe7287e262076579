// ember's whole public API in one include. Installed as <ember/ember.h>; inside the tree "ember.h".
// Each header below also stands alone (<ember/core/tensor.h>, <ember/nn/linear.h>, ...).
#pragma once

#include "base/error.h"       // the error types every call may throw
#include "base/version.h"     // EMBER_VERSION
#include "core/device.h"      // Device, cuda::is_available()
#include "core/generator.h"   // seeds and the Philox stream
#include "core/host.h"        // host threads
#include "core/ops.h"         // every op, ember::ops::
#include "core/stream.h"      // CUDA streams and events, free of CUDA types
#include "core/tensor.h"      // Tensor
#include "core/transfer_ledger.h"  // counts of the bytes that crossed PCIe
#include "data/dataset.h"     // Fashion-MNIST in host memory
#include "data/loader.h"      // batches on a device
#include "distributed/ddp.h"  // data-parallel training
#include "formats/safetensors.h"  // tensors to and from .safetensors files
#include "models/io.h"        // save_model / load_model
#include "nn/nn.h"            // modules and losses
#include "optim/optimizer.h"  // SGD, AdamW
#include "optim/schedule.h"   // learning-rate schedules
#include "train/trainer.h"    // `ember train` as a function
