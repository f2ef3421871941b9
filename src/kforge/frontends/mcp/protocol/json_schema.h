// A small JSON Schema validator for the subset of keywords kforge's tool schemas use, so a
// tool's `inputSchema` is both what clients see and what the server checks.
//
// Supported (JSON Schema 2020-12 meaning): type (a name or a list of names; "integer" accepts
// 5.0), enum, const, properties, required, additionalProperties (boolean or schema), items
// (one schema), minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength
// (in bytes), minItems, maxItems, anyOf (one of the schemas must match), allOf (all must),
// if/then/else, $defs with local $ref ("#/$defs/<name>"). Annotations are ignored: title,
// description, default, examples, $schema, format, x-mcp-header, $anchor, $comment. Any
// other keyword is refused by `check_supported_schema` (as is a $ref that does not resolve),
// so a schema can never promise a constraint that is silently not checked.
//
// Both walks are bounded (128 levels of schema or $ref hops), so a self-referencing schema or
// a deep value ends with an error, not a stack overflow.
//
// Errors are kInvalidArgument with the JSON path of the offending value and a reason, e.g.
// "io_contract.args[2].role: must be one of \"input\", \"output\", \"inout\"".
//
// Example:
//   KF_RETURN_IF_ERROR(check_supported_schema(schema));
//   KF_RETURN_IF_ERROR(validate_json(schema, arguments));
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp {

// kInvalidArgument naming the schema location of an unsupported keyword or malformed value.
Status check_supported_schema(const Json& schema);

// Validates `value` against `schema` (which passed check_supported_schema). `path` prefixes
// the reported location; the root value is reported as "arguments".
Status validate_json(const Json& schema, const Json& value, const JsonPath& path = JsonPath());

}  // namespace kforge::frontends::mcp
