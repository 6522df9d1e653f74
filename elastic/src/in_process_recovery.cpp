#include "tenax/elastic/in_process_recovery.h"

#include <sstream>

namespace tenax::elastic {

std::string format_spare_assignment(const SpareAssignment& assignment) {
  return std::to_string(assignment.rank) + " " + std::to_string(assignment.generation) + " " +
         std::to_string(assignment.restart_count);
}

std::optional<SpareAssignment> parse_spare_assignment(const std::string& text) {
  std::istringstream in(text);
  SpareAssignment out;
  std::string rest;
  if (!(in >> out.rank >> out.generation >> out.restart_count) || (in >> rest) || out.rank < 0 ||
      out.generation < 0 || out.restart_count < 0) {
    return std::nullopt;
  }
  return out;
}

}  // namespace tenax::elastic
