// Evaluating a masked language model (models/bert.h) on fixed held-out batches: masked-byte accuracy and loss.
#pragma once

#include <cstdint>
#include <vector>

#include "data/text.h"
#include "models/bert.h"

namespace ember::train {

// The seed of the held-out batches: every run, and `ember eval`, evaluates on the same windows and masks.
inline constexpr uint64_t kHeldOutSeed = 1234;

// `count` batches of `batch` windows of `seq_len` bytes from the corpus's held-out part, masked, on the host.
std::vector<data::MaskedBatch> held_out_batches(const data::TextCorpus& corpus, int64_t count, int64_t batch,
                                                int64_t seq_len);

struct MaskedEval {
  double loss_sum = 0, correct = 0;  // over the chosen positions
  int64_t tokens = 0;                // chosen positions
  double loss() const { return tokens > 0 ? loss_sum / double(tokens) : 0; }
  double accuracy() const { return tokens > 0 ? correct / double(tokens) : 0; }
};
// The model (in eval mode; its mode is given back) on `batches`, moved to its device unless they are there; the
// sums stay on the device until the end.
MaskedEval evaluate_masked(models::BertMaskedLM& model, const std::vector<data::MaskedBatch>& batches);

// FormatError unless `arch`, read from `source`, is a byte-level BERT (models/bert.h) that reads windows of `seq_len`.
void check_text_model(const models::Architecture& arch, int64_t seq_len, const std::string& source);

}  // namespace ember::train
