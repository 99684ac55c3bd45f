// Guide specs shared by equal grammars (guide_specs.h).
#include "engine/structured/guide_specs.h"

#include <utility>

namespace sy::structured {

GuideSpecs::GuideSpecs(std::shared_ptr<const TokenVocabulary> vocabulary, std::size_t capacity, std::size_t mask_bytes)
    : vocabulary_(std::move(vocabulary)), capacity_(capacity < 1 ? 1 : capacity), mask_bytes_(mask_bytes) {}

std::shared_ptr<const GuideSpec> GuideSpecs::get(const std::shared_ptr<const Grammar>& grammar) {
  std::lock_guard lock(mutex_);
  for (auto it = specs_.begin(); it != specs_.end(); ++it) {
    // Equal grammars (the same schema compiled twice) allow the same texts, state by state.
    if ((*it)->grammar == grammar || *(*it)->grammar == *grammar) {
      specs_.splice(specs_.begin(), specs_, it);
      return specs_.front();
    }
  }
  specs_.push_front(std::make_shared<const GuideSpec>(GuideSpec{grammar, vocabulary_, std::make_shared<MaskCache>(mask_bytes_)}));
  if (specs_.size() > capacity_) specs_.pop_back();  // its guides keep it while they live
  return specs_.front();
}

std::size_t GuideSpecs::size() const {
  std::lock_guard lock(mutex_);
  return specs_.size();
}

}  // namespace sy::structured
