/* A C extension whose `call(f)` calls `f()` back through the C API, from a frame of its own
   (`cext_call_back`, kept out of line) that a native unwinder must show between the two Python
   frames. Built by tests/integration/test_native.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) PyObject *cext_call_back(PyObject *f) {
    PyObject *r = PyObject_CallObject(f, NULL);
    /* Keeps the call from being a tail call. */
    __asm__ volatile("" ::: "memory");
    return r;
}

static PyObject *cext_call(PyObject *self, PyObject *f) {
    (void)self;
    return cext_call_back(f);
}

static PyMethodDef methods[] = {
    {"call", cext_call, METH_O, "call(f): f() from C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyunwind_cext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_pyunwind_cext(void) { return PyModule_Create(&module); }
