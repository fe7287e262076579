// held_out_batches and evaluate_masked: the held-out part's fixed batches through the model in eval mode.
#include "train/text_eval.h"

#include "core/ops.h"
#include "nn/loss.h"

namespace ember::train {

std::vector<data::MaskedBatch> held_out_batches(const data::TextCorpus& corpus, int64_t count, int64_t batch,
                                                int64_t seq_len) {
  Generator generator(kHeldOutSeed);
  std::vector<data::MaskedBatch> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(data::make_masked_batch(corpus.held_out(), corpus.held_out_bytes(), batch, seq_len, generator));
  return out;
}

MaskedEval evaluate_masked(models::BertMaskedLM& model, const std::vector<data::MaskedBatch>& batches) {
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.device();
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device), correct = Tensor::zeros({}, DType::F32, device);
  MaskedEval r;
  nn::CrossEntropyLoss ce;
  for (const data::MaskedBatch& batch : batches) {
    if (batch.chosen() == 0) continue;
    const data::MaskedBatch b = batch.to(device);  // no copy for batches already there
    const Tensor logits = model.forward(b.ids, b.positions);
    ops::add_(loss_sum, ce.forward(logits, b.targets), static_cast<double>(b.chosen()));
    ops::add_(correct, ops::cast(ops::count_correct(logits, b.targets), DType::F32));
    r.tokens += b.chosen();
  }
  r.loss_sum = loss_sum.item<float>();
  r.correct = correct.item<float>();
  model.train(was_training);
  return r;
}

void check_text_model(const models::Architecture& arch, int64_t seq_len, const std::string& source) {
  EMBER_CHECK(arch.is_bert(), FormatError, source, " holds a ", arch.family(), " (", arch.str(),
              "), not a BERT; give the checkpoint of a `ember train --model bert` run, or --model ", arch.kind);
  EMBER_CHECK(arch.classes == data::kByteVocabulary, FormatError, source, ": the model's vocabulary holds ",
              arch.classes, " tokens, but byte-level text needs ", data::kByteVocabulary, " (256 bytes and [MASK])");
  EMBER_CHECK(seq_len <= arch.seq_len, FormatError, "--seq-len ", seq_len, " is longer than the position table of ",
              source, " (", arch.seq_len, " positions); use --seq-len ", arch.seq_len, " or less");
}

}  // namespace ember::train
