#include "tenax/sdk/models/auto_model.h"

#include "models/config_json.h"
#include "tenax/core/error.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/sdk/models/vit.h"

namespace tenax::sdk {
namespace {

using Loader = std::shared_ptr<PretrainedModel> (*)(const std::filesystem::path&, const PretrainedOptions&);

template <typename M>
std::shared_ptr<PretrainedModel> load(const std::filesystem::path& dir, const PretrainedOptions& options) {
  return M::from_pretrained(dir, options);
}

template <typename M>
std::shared_ptr<PretrainedModel> build(const std::filesystem::path& dir, const PretrainedOptions& options) {
  return PretrainedModel::from_config<M>(dir, options);
}

struct Family {
  const char* model_type;
  Loader load;
  Loader build;
};

// The registration of every family: its config.json model_type and its classification model.
constexpr Family kFamilies[] = {
    {"bert", &load<BertForSequenceClassification>, &build<BertForSequenceClassification>},
    {"distilbert", &load<DistilBertForSequenceClassification>, &build<DistilBertForSequenceClassification>},
    {"vit", &load<ViTForImageClassification>, &build<ViTForImageClassification>},
};

std::string joined_types() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "\"" : ", \"") + std::string(f.model_type) + "\"";
  return s;
}

const Family& family_of(const std::filesystem::path& dir, const std::string& type) {
  for (const Family& f : kFamilies) {
    if (type == f.model_type) return f;
  }
  detail::config_error((dir / "config.json").string(), "model_type",
                       "\"" + type + "\" is not a registered model family (registered: " + joined_types() + ")");
}

}  // namespace

std::string AutoModelForClassification::model_type(const std::filesystem::path& dir) {
  const auto json = detail::ConfigJson::from_file(dir / "config.json");
  auto type = json.read_string("model_type");
  if (!type) json.fail("model_type", "missing; it names the model family (one of " + joined_types() + ")");
  return *type;
}

std::shared_ptr<PretrainedModel> AutoModelForClassification::from_pretrained(const std::filesystem::path& dir,
                                                                             const PretrainedOptions& options) {
  return family_of(dir, model_type(dir)).load(dir, options);
}

std::shared_ptr<PretrainedModel> AutoModelForClassification::from_config(const std::filesystem::path& dir,
                                                                         const PretrainedOptions& options) {
  return family_of(dir, model_type(dir)).build(dir, options);
}

std::vector<std::string> AutoModelForClassification::model_types() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

}  // namespace tenax::sdk
