#include "tenax/elastic/in_process_recovery.h"

#include <sstream>

namespace tenax::elastic {

std::string format_spare_assignment(const SpareAssignment& assignment) {
  return std::to_string(assignment.local_rank) + " " + std::to_string(assignment.generation) + " " +
         std::to_string(assignment.restart_count);
}

std::optional<SpareAssignment> parse_spare_assignment(const std::string& text) {
  std::istringstream in(text);
  SpareAssignment out;
  std::string rest;
  if (!(in >> out.local_rank >> out.generation >> out.restart_count) || (in >> rest) || out.local_rank < 0 ||
      out.generation < 0 || out.restart_count < 0) {
    return std::nullopt;
  }
  return out;
}

std::string format_node_layout(const NodeLayout& layout) {
  return std::to_string(layout.rank_offset) + " " + std::to_string(layout.world_size);
}

std::optional<NodeLayout> parse_node_layout(const std::string& text) {
  std::istringstream in(text);
  NodeLayout out;
  std::string rest;
  if (!(in >> out.rank_offset >> out.world_size) || (in >> rest) || out.rank_offset < 0 || out.world_size < 1 ||
      out.rank_offset >= out.world_size) {
    return std::nullopt;
  }
  return out;
}

}  // namespace tenax::elastic
