// Post-processors of tokenizer.json (see post_processor.h).
#include "engine/text/post_processor.h"

#include "engine/text/bpe_model.h"
#include "engine/text/json_fields.h"

namespace sy::text {

Status PostProcessor::add(const nlohmann::json& node, const std::string& origin, PostProcessor& p) {
  if (node.is_null()) return Status::Ok();
  auto type = type_of(node, origin, "post_processor");
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  const std::string what = "post_processor " + t;
  if (t == "ByteLevel") return Status::Ok();  // trims offsets only; the ids are unchanged
  if (t == "Sequence") {
    if (!node.contains("processors") || !node["processors"].is_array())
      return field_error(origin, what, "\"processors\" must be a list");
    for (const auto& child : node["processors"]) SY_RETURN_IF_ERROR(add(child, origin, p));
    return Status::Ok();
  }
  if (t != "TemplateProcessing")
    return field_error(origin, "post_processor type '" + t + "'",
                       "not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
  if (!node.contains("single") || !node["single"].is_array())
    return field_error(origin, what, "\"single\" must be a list");
  const nlohmann::json specials = node.contains("special_tokens") ? node["special_tokens"] : nlohmann::json::object();
  if (!specials.is_object()) return field_error(origin, what, "\"special_tokens\" must be an object");
  std::vector<Item> items;
  for (const auto& piece : node["single"]) {
    if (piece.is_object() && piece.contains("Sequence")) {
      items.push_back({true, {}});
    } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
               piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array())
        return field_error(origin, what, "special token '" + name + "' has no entry with \"ids\" in special_tokens");
      Item item;
      for (const auto& id : specials[name]["ids"]) {
        // HF reads these as u32 and refuses the rest; get<int32_t> alone would wrap -7 or
        // 4294967297 into some other token. The vocabulary's bound applies, as for every id.
        if (!is_token_id(id))
          return field_error(origin, what, "ids of special token '" + name + "' must be integers in [0, " +
                                               std::to_string(kMaxTokenId) + "], not " + id.dump());
        item.ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
      }
      items.push_back(std::move(item));
    } else {
      return field_error(origin, what, "an item of \"single\" is neither {\"Sequence\": ...} nor {\"SpecialToken\": ...}");
    }
  }
  p.templates_.push_back(std::move(items));
  return Status::Ok();
}

StatusOr<PostProcessor> PostProcessor::parse(const nlohmann::json& node, const std::string& origin) {
  PostProcessor p;
  SY_RETURN_IF_ERROR(add(node, origin, p));
  return p;
}

PostProcessor PostProcessor::bos_eos(std::vector<std::int32_t> bos, std::vector<std::int32_t> eos) {
  PostProcessor p;
  std::vector<Item> items;
  if (!bos.empty()) items.push_back({false, std::move(bos)});
  items.push_back({true, {}});
  if (!eos.empty()) items.push_back({false, std::move(eos)});
  p.templates_.push_back(std::move(items));
  return p;
}

std::vector<std::int32_t> PostProcessor::apply(std::vector<std::int32_t> ids) const {
  for (const auto& items : templates_) {
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Item& item : items) {
      if (item.is_sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
    ids = std::move(out);
  }
  return ids;
}

}  // namespace sy::text
