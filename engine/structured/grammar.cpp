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
