// How an execution's end reaches its worker: the backend calls a Completion on the worker's
// event loop once the work has finished on the device, with the interval it occupied there.
#pragma once

#include <cstdint>

namespace sy {

// When an execution ran on its device, on the event loop's time base (sim and virtual cpu:
// the modelled or measured duration after its start; cpu on the wall clock: the interval its
// device thread measured; cuda: the device's own events).
struct ExecutionTiming {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// What to call when an execution ends: a member function of the worker and the worker. Plain
// data rather than a std::function: backends store and copy it on every execution (hundreds
// of thousands a second in the simulator) without allocating or type-erasing anything.
class Completion {
 public:
  Completion() = default;
  // Calls (object->*Method)(timing).
  template <class T, void (T::*Method)(ExecutionTiming)>
  static Completion of(T* object) {
    return Completion(object, [](void* o, ExecutionTiming timing) { (static_cast<T*>(o)->*Method)(timing); });
  }
  void operator()(ExecutionTiming timing) const { fn_(object_, timing); }
  explicit operator bool() const { return fn_ != nullptr; }

 private:
  using Fn = void (*)(void*, ExecutionTiming);
  Completion(void* object, Fn fn) : object_(object), fn_(fn) {}
  void* object_ = nullptr;
  Fn fn_ = nullptr;
};

}  // namespace sy
