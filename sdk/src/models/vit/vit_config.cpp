#include "tenax/sdk/models/vit_config.h"

#include <nlohmann/json.hpp>

#include "models/config_json.h"

namespace tenax::sdk {
namespace {

using detail::check_positive;
using detail::check_probability;
using detail::config_error;
using detail::ConfigJson;

void read_side(const ConfigJson& in, const char* key, std::int64_t& out) {
  const auto& j = in.document();
  if (auto it = j.find(key); it != j.end() && it->is_array()) {
    in.fail(key, "a [height, width] list is not supported: Tenax's ViT takes square images and patches (an integer)");
  }
  in.read_int(key, out, ConfigJson::kRequired);
}

ViTConfig parse(const ConfigJson& in) {
  in.expect_model_type("vit");
  ViTConfig c;
  in.read_int("hidden_size", c.hidden_size, ConfigJson::kRequired);
  in.read_int("num_hidden_layers", c.num_hidden_layers, ConfigJson::kRequired);
  in.read_int("num_attention_heads", c.num_attention_heads, ConfigJson::kRequired);
  in.read_int("intermediate_size", c.intermediate_size, ConfigJson::kRequired);
  read_side(in, "image_size", c.image_size);
  read_side(in, "patch_size", c.patch_size);
  in.read_int("num_channels", c.num_channels);
  in.read_int("encoder_stride", c.encoder_stride);
  in.read_bool("qkv_bias", c.qkv_bias);
  in.read_double("hidden_dropout_prob", c.hidden_dropout_prob);
  in.read_double("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  in.read_double("initializer_range", c.initializer_range);
  in.read_double("layer_norm_eps", c.layer_norm_eps);
  if (auto act = in.read_string("hidden_act"); act && *act != "gelu") {
    in.fail("hidden_act", "\"" + *act + "\" is not supported: Tenax's ViT computes only \"gelu\" (exact, erf)");
  }
  in.read_labels(c);
  c.validate(in.where());
  return c;
}

}  // namespace

void ViTConfig::validate(const std::string& where) const {
  check_positive(where, "hidden_size", hidden_size);
  check_positive(where, "num_hidden_layers", num_hidden_layers);
  check_positive(where, "num_attention_heads", num_attention_heads);
  check_positive(where, "intermediate_size", intermediate_size);
  check_positive(where, "image_size", image_size);
  check_positive(where, "patch_size", patch_size);
  check_positive(where, "num_channels", num_channels);
  if (hidden_size % num_attention_heads != 0) {
    config_error(where, "hidden_size",
                 std::to_string(hidden_size) + " is not a multiple of num_attention_heads (" +
                     std::to_string(num_attention_heads) + ")");
  }
  if (image_size % patch_size != 0) {
    config_error(where, "image_size",
                 std::to_string(image_size) + " is not a multiple of patch_size (" + std::to_string(patch_size) + ")");
  }
  check_probability(where, "hidden_dropout_prob", hidden_dropout_prob);
  check_probability(where, "attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (!(initializer_range > 0.0)) config_error(where, "initializer_range", "must be positive");
  if (!(layer_norm_eps > 0.0)) config_error(where, "layer_norm_eps", "must be positive");
  validate_labels(where);
}

ViTConfig ViTConfig::from_json_file(const std::filesystem::path& path) { return parse(ConfigJson::from_file(path)); }

ViTConfig ViTConfig::from_json_string(const std::string& text, const std::string& where) {
  return parse(ConfigJson::from_string(text, where));
}

std::string ViTConfig::to_json_string() const {
  nlohmann::json j;  // keys come out sorted, as transformers sorts them
  detail::write_pretrained_keys(j, *this, "vit", "ViTForImageClassification");
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["initializer_range"] = initializer_range;
  j["layer_norm_eps"] = layer_norm_eps;
  j["image_size"] = image_size;
  j["patch_size"] = patch_size;
  j["num_channels"] = num_channels;
  j["qkv_bias"] = qkv_bias;
  j["encoder_stride"] = encoder_stride;
  return j.dump(2) + "\n";
}

}  // namespace tenax::sdk
