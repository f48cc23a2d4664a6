// A C++ library whose functions have the names C++ gives: namespaces, a class, class and
// function templates, a lambda, and the clones gcc makes at -O2 (`.isra.0`: a struct passed by
// reference of which one field is used; `.constprop.0`: an argument always the same constant;
// `.cold`: a path taken for unlikely, moved out of its function; `.localalias`: the local alias
// -fno-semantic-interposition gives a global function for calls from inside the library, which
// gdb names by the global name). `names_entry(cb, n)` calls down through all of them to `cb`,
// a ctypes callback, from the cold path of `work::scaled` (n > 1000), through the inlined
// `work::hop<long>`. Built by tests/integration/test_native_names.py (g++ -O2 -fPIC
// -fno-semantic-interposition, with -g and without), called by tests/scenarios/native_names.py.
// Every call is followed by an empty asm statement, so that none is a tail call.

typedef int (*callback_t)(int);

namespace work {

struct Big {
    long pad[8];
    int depth;
};

__attribute__((noinline, cold)) static void rare(int x) {
    __asm__ volatile("" : : "r"(x) : "memory");
}

__attribute__((noinline)) static int scaled(callback_t cb, int x, int k) {
    int r = 0;
    if (__builtin_expect(x > 1000, 0)) {
        rare(x);
        r = cb(x * k);
    }
    __asm__ volatile("" ::: "memory");
    return r + k;
}

template <typename T>
__attribute__((always_inline)) inline T hop(callback_t cb, T x) {
    return static_cast<T>(scaled(cb, static_cast<int>(x), 3));
}

__attribute__((noinline)) static int dive(const Big &b, callback_t cb) {
    int r = hop<long>(cb, b.depth);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

template <typename T>
struct Box {
    T value;
    callback_t cb;
    __attribute__((noinline)) T apply(T x) const {
        Big big{};
        big.depth = static_cast<int>(x + value);
        T r = static_cast<T>(dive(big, cb));
        __asm__ volatile("" ::: "memory");
        return r;
    }
};

class Runner {
  public:
    explicit Runner(callback_t cb) : cb_(cb) {}
    __attribute__((noinline)) int run(int n);

  private:
    callback_t cb_;
};

template <typename F>
__attribute__((noinline)) int invoke(F f, int n) {
    int r = f(n);
    __asm__ volatile("" ::: "memory");
    return r;
}

int Runner::run(int n) {
    callback_t cb = cb_;
    auto step = [cb](int k) __attribute__((noinline)) {
        Box<long> box{2, cb};
        int r = static_cast<int>(box.apply(k));
        __asm__ volatile("" ::: "memory");
        return r;
    };
    int r = invoke(step, n);
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) int park_caller(callback_t cb, int n) {
    Runner r(cb);
    int got = r.run(n);
    __asm__ volatile("" ::: "memory");
    return got;
}

}  // namespace work

extern "C" int names_entry(callback_t cb, int n) {
    int r = work::park_caller(cb, n);
    __asm__ volatile("" ::: "memory");
    return r;
}
