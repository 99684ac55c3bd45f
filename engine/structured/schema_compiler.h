// Compiles a JSON schema (the subset guided decoding supports) into a Grammar; any keyword
// outside the subset is an error naming it, never silently ignored.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/structured/grammar.h"

namespace sy::structured {

// Supported: type (object, array, string, number, integer, boolean, null, or a list of them),
// properties, required, additionalProperties (false, true, or a schema), enum, const, items,
// minItems, maxItems, minLength, maxLength, anyOf, oneOf (as anyOf), $ref to #/$defs/<name> or
// #/definitions/<name>, and the annotations title, description, default, examples, $schema,
// $id, $comment (ignored). Errors name the keyword and its place ("at /properties/a: ...").
StatusOr<std::shared_ptr<const Grammar>> compile_schema(const nlohmann::json& schema);

}  // namespace sy::structured
