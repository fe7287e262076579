// evaluate(): the test set through the model in eval mode, with sums kept on the device until the end.
#include "train/evaluate.h"

#include "core/ops.h"
#include "data/loader.h"
#include "nn/loss.h"

namespace ember::train {

void check_model_fits(const models::Architecture& arch, const data::Dataset& data, const std::string& source) {
  EMBER_CHECK(!arch.is_bert(), FormatError, source, " holds a BERT (", arch.str(),
              "), which reads text, not images; use it with --model bert or --text");
  EMBER_CHECK(shape_numel(arch.sample_shape()) == data.sample_numel() && arch.classes == data::kFashionMnistClasses,
              FormatError, source, ": the model is ", arch.str(), " but Fashion-MNIST needs ", data.sample_numel(),
              " inputs and ", data::kFashionMnistClasses, " outputs");
}

EvalResult evaluate(nn::Module& model, const models::Architecture& arch, const data::Dataset& data, int64_t batch_size,
                    bool confusion) {
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.device();
  data::DataLoader loader(data, {.batch_size = batch_size, .shuffle = false, .seed = 0, .drop_last = false,
                                 .device = device, .sample_shape = arch.sample_shape()});
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device), correct = Tensor::zeros({}, DType::F32, device);
  EvalResult r;
  const int64_t classes = arch.classes;
  if (confusion) r.confusion.assign(classes, std::vector<int64_t>(classes, 0));
  const int64_t* labels = data.labels.data<int64_t>();
  nn::CrossEntropyLoss ce;
  data::Batch batch;
  while (loader.next(batch)) {
    const Tensor logits = model.forward(batch.x);
    ops::add_(loss_sum, ce.forward(logits, batch.y), static_cast<double>(batch.size()));
    ops::add_(correct, ops::cast(ops::count_correct(logits, batch.y), DType::F32));
    if (confusion) {
      const std::vector<int64_t> predicted = ops::argmax(logits).to_vector<int64_t>();
      for (int64_t i = 0; i < batch.size(); ++i) r.confusion[labels[r.samples + i]][predicted[i]]++;
    }
    r.samples += batch.size();
  }
  r.loss = r.samples > 0 ? loss_sum.item<float>() / double(r.samples) : 0;
  r.accuracy = r.samples > 0 ? correct.item<float>() / double(r.samples) : 0;
  for (int64_t c = 0; confusion && c < classes; ++c) {
    int64_t total = 0;
    for (int64_t v : r.confusion[c]) total += v;
    r.per_class_accuracy.push_back(total > 0 ? double(r.confusion[c][c]) / double(total) : 0);
  }
  model.train(was_training);
  return r;
}

}  // namespace ember::train
