// A C++ extension whose `park(n)` blocks for good in std::condition_variable::wait, with the GIL
// released, from a function of its own (`blocker::park(int)`, kept out of line) that a native
// unwinder shows under libstdc++'s wait: the shape of a native library stalled in a wait (a
// torch.distributed reducer in finalize_backward, say). Built by
// tests/integration/test_why_native.py with g++ against the interpreter's headers; used by
// tests/scenarios/why_native.py.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <condition_variable>
#include <mutex>

namespace blocker {

std::mutex mutex;
std::condition_variable wakeup;
bool released = false;  // never set: nobody notifies

// Waits until `released`, which never comes. A plain wait (no predicate) in a loop: the
// predicate overload is a template that would be inlined here and named as a frame of its own.
__attribute__((noinline)) int park(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    while (!released) {
        wakeup.wait(lock);
    }
    // Keeps the wait from being a tail call.
    __asm__ volatile("" ::: "memory");
    return n;
}

}  // namespace blocker

static PyObject *ext_park(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = blocker::park(static_cast<int>(n));
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(got);
}

static PyMethodDef methods[] = {
    {"park", ext_park, METH_O, "park(n): wait for good in a std::condition_variable"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyunwind_blocker", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_pyunwind_blocker(void) { return PyModule_Create(&module); }
