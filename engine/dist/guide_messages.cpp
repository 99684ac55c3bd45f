#include "engine/dist/guide_messages.h"

namespace sy::dist {
namespace {

// Counts on the wire are checked against the bytes left, each item taking at least `min_bytes`,
// so a count no sender could have meant is refused before anything is allocated for it.
Status get_count(ByteReader& r, std::size_t min_bytes, const char* what, std::uint64_t& n) {
  SY_RETURN_IF_ERROR(r.get(n));
  if (n > r.left() / min_bytes) return Status::Error(std::string(what) + ": " + std::to_string(n) + " entries");
  return Status::Ok();
}

}  // namespace

GuideVocabulary GuideVocabulary::of(const structured::TokenVocabulary& v) {
  GuideVocabulary m;
  m.bytes.reserve(static_cast<std::size_t>(v.size()));
  for (std::int32_t id = 0; id < v.size(); ++id) m.bytes.push_back(v.bytes(id));
  m.end_tokens = v.end_tokens();
  return m;
}

std::shared_ptr<const structured::TokenVocabulary> GuideVocabulary::build() const {
  return std::make_shared<const structured::TokenVocabulary>(bytes, end_tokens);
}

std::string encode(const GuideVocabulary& m) {
  ByteWriter w = message_writer(MessageType::GuideVocabulary);
  w.put<std::uint64_t>(m.bytes.size());
  for (const std::string& b : m.bytes) w.put_string(b);
  w.put_array(m.end_tokens);
  return std::move(w.bytes());
}

Status decode(ByteReader& r, GuideVocabulary& m) {
  std::uint64_t n = 0;
  SY_RETURN_IF_ERROR(get_count(r, 4, "guided vocabulary", n));
  m.bytes.resize(static_cast<std::size_t>(n));
  for (std::string& b : m.bytes) SY_RETURN_IF_ERROR(r.get_string(b));
  SY_RETURN_IF_ERROR(r.get_array(m.end_tokens));
  for (const std::int32_t e : m.end_tokens)
    if (e < 0 || static_cast<std::uint64_t>(e) >= n)
      return Status::Error("guided vocabulary: end token " + std::to_string(e) + " of " + std::to_string(n) + " ids");
  return Status::Ok();
}

void put_grammar(ByteWriter& w, const structured::Grammar& g) {
  w.put<std::int32_t>(g.root);
  w.put<std::uint8_t>(g.whitespace ? 1 : 0);
  w.put<std::uint64_t>(g.nodes.size());
  for (const structured::Node& n : g.nodes) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(n.kind));
    w.put<std::uint64_t>(n.properties.size());
    for (const auto& [name, value] : n.properties) {
      w.put_string(name);
      w.put<std::int32_t>(value);
    }
    w.put<std::uint64_t>(n.required);
    w.put<std::int32_t>(n.additional);
    w.put<std::int32_t>(n.items);
    w.put<std::int64_t>(n.min_items);
    w.put<std::int64_t>(n.max_items);
    w.put<std::int64_t>(n.min_length);
    w.put<std::int64_t>(n.max_length);
    w.put<std::uint64_t>(n.texts.size());
    for (const std::string& t : n.texts) w.put_string(t);
    w.put_array(n.alternatives);
  }
}

Status get_grammar(ByteReader& r, structured::Grammar& g) {
  SY_RETURN_IF_ERROR(r.get(g.root));
  std::uint8_t whitespace = 0;
  SY_RETURN_IF_ERROR(r.get(whitespace));
  if (whitespace > 1) return Status::Error("grammar whitespace flag " + std::to_string(whitespace));
  g.whitespace = whitespace == 1;
  std::uint64_t n = 0;
  // A node is at least 73 bytes: kind, three counts, required, two nodes and four bounds.
  SY_RETURN_IF_ERROR(get_count(r, 73, "grammar nodes", n));
  if (n > structured::Grammar::kMaxNodes) return Status::Error("a grammar of " + std::to_string(n) + " nodes");
  g.nodes.assign(static_cast<std::size_t>(n), structured::Node{});
  for (structured::Node& node : g.nodes) {
    std::uint8_t kind = 0;
    SY_RETURN_IF_ERROR(r.get(kind));
    node.kind = static_cast<structured::Node::Kind>(kind);
    std::uint64_t properties = 0;
    SY_RETURN_IF_ERROR(get_count(r, 8, "grammar properties", properties));
    if (properties > structured::kMaxProperties)
      return Status::Error("grammar node of " + std::to_string(properties) + " properties");
    node.properties.resize(static_cast<std::size_t>(properties));
    for (auto& [name, value] : node.properties) {
      SY_RETURN_IF_ERROR(r.get_string(name));
      SY_RETURN_IF_ERROR(r.get(value));
    }
    SY_RETURN_IF_ERROR(r.get(node.required));
    SY_RETURN_IF_ERROR(r.get(node.additional));
    SY_RETURN_IF_ERROR(r.get(node.items));
    SY_RETURN_IF_ERROR(r.get(node.min_items));
    SY_RETURN_IF_ERROR(r.get(node.max_items));
    SY_RETURN_IF_ERROR(r.get(node.min_length));
    SY_RETURN_IF_ERROR(r.get(node.max_length));
    std::uint64_t texts = 0;
    SY_RETURN_IF_ERROR(get_count(r, 4, "grammar texts", texts));
    node.texts.resize(static_cast<std::size_t>(texts));
    for (std::string& t : node.texts) SY_RETURN_IF_ERROR(r.get_string(t));
    SY_RETURN_IF_ERROR(r.get_array(node.alternatives));
  }
  return g.check();
}

}  // namespace sy::dist
