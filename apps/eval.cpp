// `ember eval` (accuracy, loss, per-class accuracy, confusion matrix) and `ember predict` (one image); a BERT's
// checkpoint goes to apps/text.h.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.h"
#include "apps/text.h"
#include "core/ops.h"
#include "models/io.h"
#include "data/loader.h"
#include "data/text.h"
#include "formats/pgm.h"
#include "train/evaluate.h"

namespace ember::apps {

namespace {

// The options a BERT's eval and predict take.
struct TextOptions {
  std::string text;
  bool text_given = false;
  int64_t batches = 100, batch_size = 64, top = 5;
  std::string mask_char;
};

void run_eval(const std::string& checkpoint, const std::string& data, const std::string& device_text, bool as_json,
              const TextOptions& text) {
  Device device = resolve_device(device_text);
  models::Network loaded = models::load_model(checkpoint, device);
  if (loaded.arch.is_bert())
    return run_text_eval(loaded, checkpoint, text.text, text.batches, text.batch_size, as_json);
  EMBER_CHECK(!text.text_given, ValueError, "--text is for BERT checkpoints, but ", checkpoint, " holds a ",
              loaded.arch.family(), " (", loaded.arch.str(), ") of Fashion-MNIST images; leave --text out");
  data::Dataset test = data::load_fashion_mnist(data, data::Split::Test);
  train::check_model_fits(loaded.arch, test, checkpoint);
  train::EvalResult r = train::evaluate(*loaded.model, loaded.arch, test, train::kEvalBatch, true);
  if (as_json) {
    nlohmann::json j{{"accuracy", r.accuracy}, {"loss", r.loss}, {"per_class", nlohmann::json::object()},
                     {"confusion", r.confusion}};
    for (size_t c = 0; c < r.per_class_accuracy.size(); ++c)
      j["per_class"][data::kFashionMnistClassNames[c]] = r.per_class_accuracy[c];
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("%s (%s) on %lld test images, %s\n", checkpoint.c_str(), loaded.arch.str().c_str(),
              static_cast<long long>(r.samples), device.str().c_str());
  std::printf("accuracy %.2f%%, loss %.4f\n\nper class:\n", 100 * r.accuracy, r.loss);
  for (size_t c = 0; c < r.per_class_accuracy.size(); ++c)
    std::printf("  %-12s %6.2f%%\n", data::kFashionMnistClassNames[c], 100 * r.per_class_accuracy[c]);
  std::printf("\nconfusion (rows: true class, columns: predicted)\n%13s", "");
  for (size_t c = 0; c < r.confusion.size(); ++c) std::printf("%6zu", c);
  std::printf("\n");
  for (size_t t = 0; t < r.confusion.size(); ++t) {
    std::printf("  %zu %-10.10s", t, data::kFashionMnistClassNames[t]);
    for (int64_t v : r.confusion[t]) std::printf("%6lld", static_cast<long long>(v));
    std::printf("\n");
  }
}

void run_predict(const std::string& checkpoint, const std::string& data, const std::string& device_text, int64_t index,
                 const std::string& pgm, const TextOptions& text) {
  EMBER_CHECK(text.text_given || (index >= 0) != !pgm.empty(), ValueError,
              "give exactly one of --index N (a test-set image) or --pgm FILE, or --text for a BERT's checkpoint");
  Device device = resolve_device(device_text);
  models::Network loaded = models::load_model(checkpoint, device);
  if (loaded.arch.is_bert()) {
    EMBER_CHECK(text.text_given && index < 0 && pgm.empty(), ValueError, checkpoint,
                " holds a BERT: give --text \"...\" with [MASK] where the bytes to predict are (not --index or --pgm)");
    EMBER_CHECK(text.mask_char.size() <= 1, ValueError, "--mask-char takes one character, got '", text.mask_char, "'");
    return run_text_predict(loaded, checkpoint, text.text, text.mask_char.empty() ? -1 : text.mask_char[0], text.top);
  }
  EMBER_CHECK(!text.text_given, ValueError, "--text is for BERT checkpoints, but ", checkpoint, " holds a ",
              loaded.arch.family(), " of images; give --index N or --pgm FILE");
  EMBER_CHECK((index >= 0) != !pgm.empty(), ValueError, "give exactly one of --index N (a test-set image) or --pgm FILE");
  EMBER_CHECK(shape_numel(loaded.arch.sample_shape()) == 784, FormatError, checkpoint, ": the model takes ",
              loaded.arch.str(), " inputs; a 28x28 image has 784");
  Tensor image;
  std::string what;
  int64_t truth = -1;
  if (!pgm.empty()) {
    image = formats::read_pgm(pgm, 28, 28);
    what = pgm;
  } else {
    data::Dataset test = data::load_fashion_mnist(data, data::Split::Test);
    EMBER_CHECK(index < test.size(), ValueError, "--index ", index, " is out of range: the test set has ", test.size(),
                " images (0..", test.size() - 1, ")");
    image = test.images.slice(0, index, index + 1);
    truth = test.labels.data<int64_t>()[index];
    what = "test image " + std::to_string(index);
  }
  loaded.model->eval();
  const Tensor x = data::images_to_input(image, loaded.arch.sample_shape(), device);
  std::vector<float> probs = ops::softmax(loaded.model->forward(x)).to_vector<float>();
  size_t best = 0;
  for (size_t c = 1; c < probs.size(); ++c)
    if (probs[c] > probs[best]) best = c;
  const char* name = best < 10 ? data::kFashionMnistClassNames[best] : "?";
  std::printf("%s: %s (class %zu, %.1f%%)", what.c_str(), name, best, 100 * probs[best]);
  if (truth >= 0) std::printf("; true class: %s", data::kFashionMnistClassNames[truth]);
  std::printf("\n");
  for (size_t c = 0; c < probs.size(); ++c)
    std::printf("  %zu %-12s %6.2f%%\n", c, c < 10 ? data::kFashionMnistClassNames[c] : "?", 100 * probs[c]);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* sub = app.add_subcommand("eval", "Evaluate a checkpoint on the Fashion-MNIST test set, or a BERT's on held-out text");
  sub->option_defaults()->always_capture_default();
  auto checkpoint = std::make_shared<std::string>(), data = std::make_shared<std::string>(data::default_fashion_mnist_dir());
  auto device = std::make_shared<std::string>("auto");
  auto json = std::make_shared<bool>(false);
  sub->add_option("--checkpoint", *checkpoint, "model.safetensors (ember's or PyTorch's)")->required();
  sub->add_option("--data", *data, "Directory with the Fashion-MNIST IDX files");
  sub->add_option("--device", *device, "auto, cpu, cuda or cuda:N");
  sub->add_flag("--json", *json, "Print {accuracy, loss, per_class, confusion} (BERT: {masked_accuracy, masked_loss, masked_tokens}) as JSON");
  auto text = std::make_shared<TextOptions>();
  text->text = data::default_text_path();
  auto* text_flag = sub->add_option("--text", text->text, "BERT: the corpus whose held-out last 5% is evaluated (a file or folder)");
  sub->add_option("--eval-batches", text->batches, "BERT: fixed held-out batches (seed 1234, as `ember train`'s)")->check(CLI::Range(1, 100000));
  sub->add_option("--batch-size", text->batch_size, "BERT: windows per batch")->check(CLI::Range(1, 1 << 20));
  register_action(sub, [=] {
    TextOptions t = *text;
    t.text_given = text_flag->count() > 0;
    run_eval(*checkpoint, *data, *device, *json, t);
  });
}

void add_predict_command(CLI::App& app) {
  auto* sub = app.add_subcommand("predict", "Classify one image (a test-set index or a 28x28 PGM file), or fill a text's "
                                            "[MASK]s with a BERT");
  sub->option_defaults()->always_capture_default();
  auto checkpoint = std::make_shared<std::string>(), data = std::make_shared<std::string>(data::default_fashion_mnist_dir());
  auto device = std::make_shared<std::string>("auto"), pgm = std::make_shared<std::string>();
  auto index = std::make_shared<int64_t>(-1);
  sub->add_option("--checkpoint", *checkpoint, "model.safetensors")->required();
  sub->add_option("--index", *index, "Index of a test-set image")->check(CLI::NonNegativeNumber);
  sub->add_option("--pgm", *pgm, "A binary PGM (P5) image of 28x28 pixels");
  sub->add_option("--data", *data, "Directory with the Fashion-MNIST IDX files");
  sub->add_option("--device", *device, "auto, cpu, cuda or cuda:N");
  auto text = std::make_shared<TextOptions>();
  auto* text_flag = sub->add_option("--text", text->text, "BERT: text with [MASK] for each byte to predict, at most a window long");
  sub->add_option("--mask-char", text->mask_char, "BERT: this character marks a byte to predict too (e.g. _)");
  sub->add_option("--top", text->top, "BERT: candidates shown per masked byte")->check(CLI::Range(1, 256));
  register_action(sub, [=] {
    TextOptions t = *text;
    t.text_given = text_flag->count() > 0;
    run_predict(*checkpoint, *data, *device, *index, *pgm, t);
  });
}

}  // namespace ember::apps
