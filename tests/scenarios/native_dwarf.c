/* A plain C library (no Python.h) with DWARF, called through ctypes: `dwarf_call(cb)` calls
   `cb()` from a function inlined into it (`call_inlined`), so a native unwinder shows, between
   the two Python frames, a frame of `dwarf_call` with its file and line and `call_inlined`
   inlined at its PC. Built by tests/integration/test_arm64.py with Debian's
   aarch64-linux-gnu-gcc, with -g. */

typedef void (*callback)(void);

static inline __attribute__((always_inline)) void call_inlined(callback cb) {
    cb();
    /* Keeps the call from being a tail call. */
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void dwarf_call(callback cb) {
    call_inlined(cb);
    __asm__ volatile("" ::: "memory");
}
