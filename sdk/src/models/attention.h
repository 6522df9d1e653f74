// Scaled-dot-product attention, the one implementation every Tenax attention module calls.
//
// libtorch 1.13 has no public at::scaled_dot_product_attention, and transformers' eager BERT
// attention is this exact sequence of ops (matmul, divide by sqrt(head_dim), add the mask,
// softmax, dropout, matmul), so writing it out keeps fp32 results within rounding of Python.
// A fused kernel on torch 2.x would belong in torch_compat.h, behind this signature.
// Thread-safety: stateless.
#pragma once

#include <torch/types.h>

namespace tenax::sdk::detail {

/// The additive mask transformers builds from a [batch, seq] 0/1 attention mask:
/// (1 - mask) * finfo(dtype).min, shaped [batch, 1, 1, seq] to broadcast over heads and queries.
/// Padded keys thus get the most negative finite value, not -inf, so a fully padded row stays
/// finite (softmax of equal values), exactly as in transformers.
torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask, torch::ScalarType dtype);

/// softmax(q k^T / sqrt(d) + additive_mask) v, with dropout `dropout_p` on the probabilities
/// when `training`. q, k, v: [batch, heads, seq, head_dim]; additive_mask broadcastable to
/// [batch, heads, seq, seq] or undefined.
torch::Tensor scaled_dot_product_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& additive_mask, double dropout_p, bool training);

}  // namespace tenax::sdk::detail
