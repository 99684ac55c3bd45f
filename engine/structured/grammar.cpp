// Grammars that need no schema: any value, any object, a list of choices.
#include "engine/structured/grammar.h"

namespace sy::structured {

std::int32_t Grammar::add_any_value() {
  const auto at = [this](Node n) {
    nodes.push_back(std::move(n));
    return static_cast<std::int32_t>(nodes.size() - 1);
  };
  const std::int32_t any = at(node_of(Node::Kind::AnyOf));
  const std::int32_t object = at(node_of(Node::Kind::Object, [&](Node& n) { n.additional = any; }));
  const std::int32_t array = at(node_of(Node::Kind::Array, [&](Node& n) { n.items = any; }));
  const std::int32_t string = at(node_of(Node::Kind::String));
  const std::int32_t number = at(node_of(Node::Kind::Number));
  const std::int32_t literal = at(node_of(Node::Kind::Literal, [&](Node& n) { n.texts = {"true", "false", "null"}; }));
  nodes[static_cast<std::size_t>(any)].alternatives = {object, array, string, number, literal};
  return any;
}

Status Grammar::check() const {
  if (nodes.empty() || nodes.size() > kMaxNodes)
    return Status::Error("a grammar of " + std::to_string(nodes.size()) + " nodes (1.." + std::to_string(kMaxNodes) + ")");
  const auto n = static_cast<std::int32_t>(nodes.size());
  const auto node_ok = [n](std::int32_t i, bool none_ok) { return (none_ok && i == -1) || (i >= 0 && i < n); };
  if (!node_ok(root, false)) return Status::Error("grammar root " + std::to_string(root));
  for (std::int32_t i = 0; i < n; ++i) {
    const Node& node = nodes[static_cast<std::size_t>(i)];
    const std::string at = "grammar node " + std::to_string(i);
    if (static_cast<std::uint8_t>(node.kind) > static_cast<std::uint8_t>(Node::Kind::AnyOf))
      return Status::Error(at + ": kind " + std::to_string(static_cast<int>(node.kind)));
    if (node.properties.size() > kMaxProperties) return Status::Error(at + ": more than 64 properties");
    for (const auto& [name, value] : node.properties) {
      if (!node_ok(value, false)) return Status::Error(at + ": property value node " + std::to_string(value));
      for (const char c : name)
        if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
          return Status::Error(at + ": a property name with a quote, backslash or control byte");
    }
    if (node.properties.size() < 64 && (node.required >> node.properties.size()) != 0)
      return Status::Error(at + ": a required property it does not name");
    if (!node_ok(node.additional, true) || !node_ok(node.items, true))
      return Status::Error(at + ": additional or items node out of range");
    if (node.min_items < 0 || node.max_items < -1 || node.min_length < 0 || node.max_length < -1)
      return Status::Error(at + ": a negative bound");
    for (const std::int32_t a : node.alternatives)
      if (!node_ok(a, false)) return Status::Error(at + ": alternative node " + std::to_string(a));
  }
  return Status::Ok();
}

std::shared_ptr<const Grammar> Grammar::any_object() {
  auto g = std::make_shared<Grammar>();
  const std::int32_t any = g->add_any_value();
  // The any-value node's first alternative is the any-object node.
  g->root = g->nodes[static_cast<std::size_t>(any)].alternatives[0];
  return g;
}

std::shared_ptr<const Grammar> Grammar::choice(const std::vector<std::string>& choices) {
  auto g = std::make_shared<Grammar>();
  g->nodes.push_back(node_of(Node::Kind::Literal, [&](Node& n) { n.texts = choices; }));
  g->root = 0;
  g->whitespace = false;
  return g;
}

}  // namespace sy::structured
