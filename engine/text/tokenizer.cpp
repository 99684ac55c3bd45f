// Tokenizer: the tokenizer.json pipeline of Hugging Face tokenizers (see tokenizer.h):
// added tokens split out, normaliser, pre-tokenizer, BPE, post-processor; decoder back.
#include "engine/text/tokenizer.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <sstream>

#include "base/json_parse.h"
#include "engine/text/added_vocabulary.h"
#include "engine/text/bpe_model.h"
#include "engine/text/decoder.h"
#include "engine/text/json_fields.h"
#include "engine/text/normalizer.h"
#include "engine/text/post_processor.h"
#include "engine/text/pre_tokenizer.h"
#include "engine/text/utf8.h"

namespace sy::text {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  Decoder decoder;
  PostProcessor post_processor;
  std::string bos, eos;
  std::optional<std::int32_t> bos_id, eos_id;
  std::int32_t vocab_size = 0;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

StatusOr<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read " + path.string());
  return s.str();
}

// bos_token / eos_token of tokenizer_config.json: a string, an AddedToken object, or null.
StatusOr<std::string> config_token(const nlohmann::json& config, const char* key, const std::string& origin) {
  if (!config.contains(key) || config[key].is_null()) return std::string();
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return field_error(origin, key, "must be a string, {\"content\": ...} or null");
}

StatusOr<std::unique_ptr<Tokenizer::Impl>> build(const nlohmann::json& j, const nlohmann::json& config,
                                                 const std::string& origin, const std::string& config_origin) {
  auto impl = std::make_unique<Tokenizer::Impl>();
  if (!j.is_object()) return Status::Error(origin + ": must be a JSON object");
  if (j.contains("truncation") && !j["truncation"].is_null())
    return field_error(origin, "truncation", "is not supported (must be null)");
  if (j.contains("padding") && !j["padding"].is_null()) {
    const auto& p = j["padding"];
    const bool longest = p.is_object() && p.contains("strategy") && p["strategy"].is_string() &&
                         p["strategy"].get<std::string>() == "BatchLongest";
    if (!longest) return field_error(origin, "padding", "is not supported (must be null or BatchLongest)");
  }
  auto get = [&](const char* key) { return j.contains(key) ? j[key] : nlohmann::json(); };
  if (!j.contains("model")) return field_error(origin, "model", "is missing");

  auto normalizer = Normalizer::parse(get("normalizer"), origin);
  if (!normalizer.ok()) return normalizer.status();
  impl->normalizer = std::move(*normalizer);
  auto pre = PreTokenizer::parse(get("pre_tokenizer"), origin);
  if (!pre.ok()) return pre.status();
  impl->pre_tokenizer = std::move(*pre);
  auto model = BpeModel::parse(j["model"], origin);
  if (!model.ok()) return model.status();
  impl->model = std::move(*model);
  auto added = AddedVocabulary::parse(get("added_tokens"), impl->normalizer, origin);
  if (!added.ok()) return added.status();
  impl->added = std::move(*added);
  auto decoder = Decoder::parse(get("decoder"), origin);
  if (!decoder.ok()) return decoder.status();
  impl->decoder = std::move(*decoder);
  auto post = PostProcessor::parse(get("post_processor"), origin);
  if (!post.ok()) return post.status();
  impl->post_processor = std::move(*post);

  std::int32_t max_id = impl->model.max_id();
  for (const auto& a : impl->added.tokens()) max_id = std::max(max_id, a.id);
  impl->vocab_size = max_id + 1;

  if (!config.is_null()) {
    if (!config.is_object()) return Status::Error(config_origin + ": must be a JSON object");
    auto bos = config_token(config, "bos_token", config_origin);
    if (!bos.ok()) return bos.status();
    auto eos = config_token(config, "eos_token", config_origin);
    if (!eos.ok()) return eos.status();
    impl->bos = *bos;
    impl->eos = *eos;
    auto id_of = [&](const std::string& token) -> std::optional<std::int32_t> {
      if (const AddedToken* a = impl->added.find(token)) return a->id;
      return impl->model.token_to_id(token);
    };
    for (auto [name, token, id] : {std::tuple{"bos_token", &impl->bos, &impl->bos_id},
                                   std::tuple{"eos_token", &impl->eos, &impl->eos_id}}) {
      if (token->empty()) continue;
      *id = id_of(*token);
      if (!*id) return field_error(config_origin, name, "'" + *token + "' is not a token of " + origin);
    }
    // transformers' Llama tokenizers rebuild the template from add_bos_token / add_eos_token
    // (the "legacy" settings of Llama 2 and Mixtral checkpoints).
    const bool llama = config.contains("tokenizer_class") && config["tokenizer_class"].is_string() &&
                       config["tokenizer_class"].get<std::string>().find("Llama") != std::string::npos;
    if (llama && (config.contains("add_bos_token") || config.contains("add_eos_token"))) {
      auto add_bos = bool_field(config, "add_bos_token", true, config_origin, "add_bos_token");
      auto add_eos = bool_field(config, "add_eos_token", false, config_origin, "add_eos_token");
      if (!add_bos.ok()) return add_bos.status();
      if (!add_eos.ok()) return add_eos.status();
      if (*add_bos && !impl->bos_id) return field_error(config_origin, "add_bos_token", "is true but there is no bos_token");
      if (*add_eos && !impl->eos_id) return field_error(config_origin, "add_eos_token", "is true but there is no eos_token");
      std::vector<std::int32_t> b, e;
      if (*add_bos) b.push_back(*impl->bos_id);
      if (*add_eos) e.push_back(*impl->eos_id);
      impl->post_processor = PostProcessor::bos_eos(std::move(b), std::move(e));
    }
  }
  return impl;
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::parse(std::string_view tokenizer_json, std::string_view config_json,
                                     const std::string& origin, const std::string& config_origin) {
  auto j = parse_json(tokenizer_json);
  if (!j.ok()) return j.status().with_context(origin);
  nlohmann::json config;
  if (!config_json.empty()) {
    auto c = parse_json(config_json);
    if (!c.ok()) return c.status().with_context(config_origin);
    config = std::move(*c);
  }
  try {
    auto impl = build(*j, config, origin, config_origin);
    if (!impl.ok()) return impl.status();
    return Tokenizer(std::move(*impl));
  } catch (const std::exception& e) {  // a JSON shape the checks above missed
    return Status::Error(origin + ": " + e.what());
  }
}

StatusOr<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                                         std::string_view origin) {
  const std::string where(origin);
  return parse(tokenizer_json, config_json, where, where + " (tokenizer_config.json)");
}

StatusOr<Tokenizer> Tokenizer::load(const std::filesystem::path& model_dir) {
  const auto tokenizer_path = model_dir / "tokenizer.json";
  auto text = read_file(tokenizer_path);
  if (!text.ok()) return text.status();
  std::string config;
  const auto config_path = model_dir / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    auto c = read_file(config_path);
    if (!c.ok()) return c.status();
    config = std::move(*c);
  }
  return parse(*text, config, tokenizer_path.string(), config_path.string());
}

StatusOr<std::vector<std::int32_t>> Tokenizer::try_encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  const std::string input = is_valid_utf8(text) ? std::string(text) : utf8_lossy(text);
  std::vector<std::int32_t> ids;
  ids.reserve(input.size() / 3 + 4);
  std::vector<Segment> raw, normalized;
  std::vector<Piece> pieces;
  m.added.split(input, false, raw);
  for (const Segment& s : raw) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    if (s.end == s.begin) continue;
    auto norm = m.normalizer.apply(input.substr(s.begin, s.end - s.begin));
    if (!norm.ok()) return norm.status();
    normalized.clear();
    m.added.split(*norm, true, normalized);
    for (const Segment& n : normalized) {
      if (n.id >= 0) {
        ids.push_back(n.id);
        continue;
      }
      if (n.end == n.begin) continue;
      pieces.clear();
      pieces.push_back({norm->substr(n.begin, n.end - n.begin), s.begin == 0 && n.begin == 0});
      SY_RETURN_IF_ERROR(m.pre_tokenizer.apply(pieces));
      for (const Piece& p : pieces) m.model.tokenize(p.text, ids);
    }
  }
  if (add_special_tokens) ids = m.post_processor.apply(std::move(ids));
  return ids;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  auto ids = try_encode(text, add_special_tokens);
  return ids.ok() ? std::move(*ids) : std::vector<std::int32_t>();
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (const AddedToken* a = m.added.find(id)) {
      if (skip_special_tokens && a->special) continue;
      tokens.push_back(a->token);
    } else if (const std::string* t = m.model.id_to_token(id)) {
      tokens.push_back(*t);
    }
  }
  return m.decoder.decode(std::move(tokens));
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* a = impl_->added.find(token)) return a->id;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (const AddedToken* a = impl_->added.find(id)) return a->token;
  if (const std::string* t = impl_->model.id_to_token(id)) return *t;
  return std::nullopt;
}

std::int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::string Tokenizer::token_bytes(std::int32_t id) const {
  const Impl& m = *impl_;
  if (const AddedToken* a = m.added.find(id)) return a->special ? std::string() : m.decoder.token_bytes(a->token);
  if (const std::string* t = m.model.id_to_token(id)) return m.decoder.token_bytes(*t);
  return {};
}

bool Tokenizer::is_special(std::int32_t id) const {
  const AddedToken* a = impl_->added.find(id);
  return a && a->special;
}

std::optional<std::int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<std::int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }
std::string Tokenizer::bos_token() const { return impl_->bos; }
std::string Tokenizer::eos_token() const { return impl_->eos; }

bool Tokenizer::extends_byte_run(std::int32_t id) const {
  if (!impl_->decoder.groups_byte_tokens()) return false;
  const auto token = id_to_token(id);
  return token && byte_token_value(*token) >= 0;
}

}  // namespace sy::text
