// Bytes moved and FLOPs of one call of an op, from the shapes of its tensor inputs
// (knowledge/torch_ops.json "bytes" and "flops"). A formula is arithmetic (+ - * /,
// parentheses, numbers) over these functions of the i-th tensor argument (i counts tensor
// arguments only, from 0; j < 0 counts dimensions from the end):
//   numel(i)  elements        esize(i)  bytes per element     bytes(i) = numel(i) * esize(i)
//   dim(i, j) size of dimension j
// e.g. matmul: "bytes(0) + bytes(1) + numel(0) / dim(0, -1) * dim(1, -1) * esize(0)".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::workbench {

struct TensorShape {
  std::vector<int64_t> shape;
  int64_t element_size = 4;  // bytes
  std::string dtype;         // "float32", "bfloat16", ... ("" when unknown)
};

// Bytes per element of a dtype name ("float32", "bfloat16", ...); 0 when unknown.
int64_t dtype_size(std::string_view dtype);

// The formula's value for `tensors`. kInvalidArgument for a syntax error or an argument
// index / dimension the tensors do not have (the op's inputs differ from what the formula
// assumes).
StatusOr<double> evaluate_formula(std::string_view formula,
                                  const std::vector<TensorShape>& tensors);

}  // namespace kforge::workbench
