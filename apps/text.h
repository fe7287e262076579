// `ember eval` and `ember predict` for a byte-level BERT checkpoint (models/bert.h); apps/eval.cpp sends a BERT's
// checkpoint here.
#pragma once

#include <cstdint>
#include <string>

#include "models/io.h"

namespace ember::apps {

// Masked accuracy and loss on `batches` fixed held-out batches of `batch_size` windows (train/text_eval.h) of the
// corpus at `text_path`, as text or JSON.
void run_text_eval(const models::Network& net, const std::string& checkpoint, const std::string& text_path,
                   int64_t batches, int64_t batch_size, bool as_json);
// Prints `text` with each [MASK] (and each byte equal to `mask_char`, when >= 0) filled with the model's best byte,
// then each masked position's `top` candidates with their probabilities.
void run_text_predict(const models::Network& net, const std::string& checkpoint, const std::string& text, int mask_char,
                      int64_t top);

}  // namespace ember::apps
