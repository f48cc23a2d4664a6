// A C++ library for tests/scenarios/why_calls.py, loaded through ctypes and through cffi's
// ABI mode: each extern "C" entry waits for good on a std::condition_variable under a C++
// function of its own, which --native names.
#include <condition_variable>
#include <mutex>

namespace calls {

std::mutex lock;
std::condition_variable never;

__attribute__((noinline)) void park_forever(int why) {
    std::unique_lock<std::mutex> held(lock);
    // Not wait(lock, predicate): that template is instantiated here, in this library.
    while (why >= 0) {
        never.wait(held);
    }
}

}  // namespace calls

extern "C" int calls_park(int why) {
    calls::park_forever(why);
    return why;
}

extern "C" int calls_wait(int why) {
    calls::park_forever(why);
    return why;
}
