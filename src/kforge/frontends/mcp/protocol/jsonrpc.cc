#include "kforge/frontends/mcp/protocol/jsonrpc.h"

#include "kforge/common/error_mapping.h"

namespace kforge::frontends::mcp::jsonrpc {
namespace {

// JSON-RPC 2.0 ids are strings or numbers; fractional numbers are discouraged but valid.
bool is_valid_id(const Json& id) {
  return id.is_string() || id.is_number();
}

Status invalid(std::string message) {
  return invalid_argument(std::move(message));
}

}  // namespace

StatusOr<Message> classify(const Json& value) {
  if (!value.is_object()) {
    return invalid("a JSON-RPC message must be an object, got " +
                   std::string(json_type_name(value)));
  }
  auto version = value.find("jsonrpc");
  if (version == value.end() || *version != "2.0") {
    return invalid("\"jsonrpc\" must be \"2.0\"");
  }
  Message m;
  auto method = value.find("method");
  auto id = value.find("id");
  if (method != value.end()) {
    if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
      return invalid("\"method\" must be a non-empty string");
    }
    m.method = method->get<std::string>();
    if (auto params = value.find("params"); params != value.end() && !params->is_null()) {
      if (!params->is_object()) {
        return invalid("\"params\" must be an object, got " + std::string(json_type_name(*params)));
      }
      m.params = *params;
    }
    if (id == value.end()) {
      m.kind = MessageKind::kNotification;
      return m;
    }
    if (!is_valid_id(*id)) {
      return invalid("a request \"id\" must be a string or a number, got " +
                     std::string(json_type_name(*id)));
    }
    m.kind = MessageKind::kRequest;
    m.id = *id;
    return m;
  }
  if (id == value.end())
    return invalid("a message needs \"method\" (request) or \"id\" (response)");
  auto result = value.find("result");
  auto error = value.find("error");
  if ((result == value.end()) == (error == value.end())) {
    return invalid("a response needs exactly one of \"result\" and \"error\"");
  }
  if (!is_valid_id(*id) && !(id->is_null() && error != value.end())) {
    return invalid("a response \"id\" must be a string or a number");
  }
  m.kind = MessageKind::kResponse;
  m.id = *id;
  if (result != value.end()) {
    m.result = *result;
    return m;
  }
  if (!error->is_object() || !error->contains("code") || !(*error)["code"].is_number_integer() ||
      !error->contains("message") || !(*error)["message"].is_string()) {
    return invalid("\"error\" must be an object with an integer \"code\" and a string \"message\"");
  }
  m.error = *error;
  return m;
}

Json readable_id(const Json& value) {
  if (!value.is_object()) return nullptr;
  auto id = value.find("id");
  if (id == value.end() || !is_valid_id(*id)) return nullptr;
  return *id;
}

std::string id_key(const Json& id) {
  return id.dump();
}

Json make_result(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json make_error(const Json& id, int code, std::string message, std::optional<Json> data) {
  Json error = {{"code", code}, {"message", std::move(message)}};
  if (data) error["data"] = std::move(*data);
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

Json make_notification(std::string method, Json params) {
  Json n = {{"jsonrpc", "2.0"}, {"method", std::move(method)}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

Json make_request(const Json& id, std::string method, Json params) {
  Json r = {{"jsonrpc", "2.0"}, {"id", id}, {"method", std::move(method)}};
  if (!params.is_null()) r["params"] = std::move(params);
  return r;
}

Json make_error_from(const Json& id, const Status& status) {
  std::optional<Json> data;
  if (!status.field_path().empty()) data = Json{{"field", status.field_path()}};
  return make_error(id, jsonrpc_code_for(status.code()), status.to_string(), std::move(data));
}

const Json* param(const Json& params, std::string_view key) {
  if (!params.is_object()) return nullptr;
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace kforge::frontends::mcp::jsonrpc
