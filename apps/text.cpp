// `ember eval` and `ember predict` for a byte-level BERT checkpoint: held-out masked accuracy and loss of a corpus,
// and the bytes a text's [MASK] marks stand for, with the top candidates.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "apps/text.h"
#include "core/ops.h"
#include "train/text_eval.h"

namespace ember::apps {

namespace {

constexpr const char* kMaskMark = "[MASK]";

models::BertMaskedLM& as_bert(const models::Network& net, const std::string& checkpoint) {
  train::check_text_model(net.arch, 1, checkpoint);
  auto* bert = dynamic_cast<models::BertMaskedLM*>(net.model.get());
  EMBER_ASSERT(bert != nullptr, "a bert architecture builds a BertMaskedLM");
  return *bert;
}

// The text as token ids: each [MASK] (or `mask_char`, when given) is kMaskToken; the masked positions in order.
std::vector<int64_t> tokenize(const std::string& text, int mask_char, std::vector<int64_t>& masked) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < text.size();) {
    const bool mark = text.compare(i, 6, kMaskMark) == 0;
    if (mark || static_cast<unsigned char>(text[i]) == mask_char) {
      masked.push_back(static_cast<int64_t>(ids.size()));
      ids.push_back(data::kMaskToken);
      i += mark ? 6 : 1;
    } else {
      ids.push_back(static_cast<unsigned char>(text[i++]));
    }
  }
  return ids;
}

// A byte as it reads in a terminal: 'a', '\n', '\x07'.
std::string show_byte(int64_t b) {
  char buf[16];
  if (b == '\n') return "'\\n'";
  if (b == '\t') return "'\\t'";
  if (b >= 32 && b < 127) std::snprintf(buf, sizeof buf, "'%c'", static_cast<char>(b));
  else std::snprintf(buf, sizeof buf, "'\\x%02llx'", static_cast<long long>(b));
  return buf;
}

}  // namespace

void run_text_eval(const models::Network& net, const std::string& checkpoint, const std::string& text_path,
                   int64_t batches, int64_t batch_size, bool as_json) {
  models::BertMaskedLM& model = as_bert(net, checkpoint);
  const int64_t seq_len = net.arch.seq_len;
  const data::TextCorpus corpus = data::load_text_corpus(text_path);
  data::check_corpus_fits(corpus, seq_len);
  const train::MaskedEval r = train::evaluate_masked(model, train::held_out_batches(corpus, batches, batch_size, seq_len));
  if (as_json) {
    std::printf("%s\n", nlohmann::json{{"masked_accuracy", r.accuracy()}, {"masked_loss", r.loss()},
                                       {"masked_tokens", r.tokens}}.dump(2).c_str());
    return;
  }
  std::printf("%s (%s) on the held-out %lld bytes of %s: %lld batches of %lld windows of %lld bytes, %lld masked bytes, "
              "%s\nmasked accuracy %.2f%%, loss %.4f\n",
              checkpoint.c_str(), net.arch.str().c_str(), static_cast<long long>(corpus.held_out_bytes()),
              text_path.c_str(), static_cast<long long>(batches), static_cast<long long>(batch_size),
              static_cast<long long>(seq_len), static_cast<long long>(r.tokens), model.device().str().c_str(),
              100 * r.accuracy(), r.loss());
}

void run_text_predict(const models::Network& net, const std::string& checkpoint, const std::string& text, int mask_char,
                      int64_t top) {
  models::BertMaskedLM& model = as_bert(net, checkpoint);
  std::vector<int64_t> masked;
  const std::vector<int64_t> ids = tokenize(text, mask_char, masked);
  EMBER_CHECK(!masked.empty(), FormatError, "--text has no ", kMaskMark,
              mask_char >= 0 ? " or --mask-char" : "", "; mark each byte to predict with ", kMaskMark,
              " (e.g. \"The qu[MASK]ck brown fox\")");
  const auto n = static_cast<int64_t>(ids.size());
  EMBER_CHECK(n <= net.arch.seq_len, FormatError, "--text is ", n, " bytes long but ", checkpoint, " reads windows of at most ",
              net.arch.seq_len, "; shorten it (each ", kMaskMark, " counts as one byte)");
  model.eval();
  const Tensor x = Tensor::from_vector(ids, {1, n}).to(model.device());
  const Tensor logits = model.forward(x).view({n, net.arch.classes});
  const std::vector<float> probs = ops::softmax(logits).to_vector<float>();
  std::string filled;
  std::vector<std::vector<int64_t>> ranked;
  for (int64_t i = 0, next = 0; i < n; ++i) {
    if (next < static_cast<int64_t>(masked.size()) && masked[next] == i) {
      const float* p = probs.data() + i * net.arch.classes;
      std::vector<int64_t> order(256);  // bytes only: [MASK] is never the answer
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top, order.end(),
                        [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
      order.resize(static_cast<size_t>(top));
      filled.push_back(static_cast<char>(order[0]));
      ranked.push_back(order);
      ++next;
    } else {
      filled.push_back(static_cast<char>(ids[i]));
    }
  }
  std::printf("%s\n", filled.c_str());
  for (size_t k = 0; k < masked.size(); ++k) {
    std::printf("byte %lld:", static_cast<long long>(masked[k]));
    const float* p = probs.data() + masked[k] * net.arch.classes;
    for (int64_t b : ranked[k]) std::printf("  %s %.1f%%", show_byte(b).c_str(), 100 * p[b]);
    std::printf("\n");
  }
}

}  // namespace ember::apps
