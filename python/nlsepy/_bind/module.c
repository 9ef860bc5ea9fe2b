/*
 * _bind/module.c -- the nlsepy extension module: `_core` over the CPU
 * implementations of the C API, or (NLSEPY_MODULE=_cuda, NLSEPY_WITH_CUDA)
 * `_cuda` over the CUDA ones.  It holds the module functions that belong to
 * no model (threads, OpenMP, the CUDA device) and registers each model's
 * solver type (_bind/<stem>.c).  The top file of the binding: it calls the
 * models' files and bind.c; they call bind.c only.
 */
#include "bind.h"

#ifdef NLSEPY_WITH_CUDA
#include "nlsepy/device.h"
#endif

/* ------------------------------------------------------------------ */
/* module functions of no model                                       */
/* ------------------------------------------------------------------ */

static PyObject *m_set_num_threads(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long n;
    if (nlsepy_parse_long(arg, &n))
        return NULL;
    if (n < 1 || n > nlse_max_threads())
        return PyErr_Format(PyExc_ValueError,
                            "num_threads must be in [1, %d] (4 per processor of this machine), "
                            "got %ld", nlse_max_threads(), n);
    return nlsepy_none(nlse_set_num_threads((int)n));
}

static PyObject *m_get_num_threads(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(nlse_get_num_threads());
}

static PyObject *m_max_threads(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(nlse_max_threads());
}

static PyObject *m_threads_in_region(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = nlse_threads_in_region();
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(n);
}

static PyObject *m_have_openmp(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(nlse_have_openmp());
}

#ifdef NLSEPY_WITH_CUDA
static PyObject *m_device_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    int n = 0;
    nlse_cuda_device_count(&n);
    return PyLong_FromLong(n);
}

static PyObject *m_set_device(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long i;
    if (nlsepy_parse_long(arg, &i))
        return NULL;
    return nlsepy_none(nlse_cuda_set_device((int)i));
}

static PyObject *m_current_device(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    int dev = 0;
    nlse_cuda_get_device(&dev);
    return PyLong_FromLong(dev);
}

/* the writable C-contiguous buffer of `arg` (its address and size) */
static int host_buffer(PyObject *arg, void **ptr, size_t *bytes)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    *ptr = view.buf;
    *bytes = (size_t)view.len;
    PyBuffer_Release(&view);
    return 0;
}

static PyObject *m_host_register(PyObject *Py_UNUSED(m), PyObject *arg)
{
    void *ptr;
    size_t bytes;
    if (host_buffer(arg, &ptr, &bytes) < 0)
        return NULL;
    return nlsepy_none(bytes ? nlse_cuda_host_register(ptr, bytes) : NLSE_OK);
}

static PyObject *m_host_unregister(PyObject *Py_UNUSED(m), PyObject *arg)
{
    void *ptr;
    size_t bytes;
    if (host_buffer(arg, &ptr, &bytes) < 0)
        return NULL;
    return nlsepy_none(bytes ? nlse_cuda_host_unregister(ptr) : NLSE_OK);
}

static PyObject *addr_or_raise(int st, void *ptr)
{
    if (st)
        return nlsepy_raise(st);
    return PyLong_FromVoidPtr(ptr);
}

static PyObject *m_device_alloc(PyObject *Py_UNUSED(m), PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0)
        return PyErr_Format(PyExc_ValueError, "bytes must be >= 0, got %zd", n);
    void *ptr = NULL;
    int st = nlse_cuda_buffer_alloc((size_t)n, &ptr); /* before ptr is read */
    return addr_or_raise(st, ptr);
}

/* a device address from a Python int (0 allowed): 0, or -1 with an exception */
static int device_address(PyObject *arg, void **ptr)
{
    *ptr = PyLong_AsVoidPtr(arg);
    return !*ptr && PyErr_Occurred() ? -1 : 0;
}

/* release(address) of a device buffer (freed or unmapped); its status is
 * not raised */
static PyObject *release_address(PyObject *arg, int (*release)(void *))
{
    void *ptr;
    if (device_address(arg, &ptr))
        return NULL;
    (void)release(ptr);
    Py_RETURN_NONE;
}

static PyObject *m_device_free(PyObject *Py_UNUSED(m), PyObject *arg)
{
    return release_address(arg, nlse_cuda_buffer_free);
}

static PyObject *m_ipc_handle(PyObject *Py_UNUSED(m), PyObject *arg)
{
    void *ptr;
    if (device_address(arg, &ptr))
        return NULL;
    char h[NLSE_CUDA_IPC_BYTES];
    int st = nlse_cuda_ipc_handle(ptr, h);
    if (st)
        return nlsepy_raise(st);
    return PyBytes_FromStringAndSize(h, NLSE_CUDA_IPC_BYTES);
}

static PyObject *m_ipc_open(PyObject *Py_UNUSED(m), PyObject *arg)
{
    char *buf;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &buf, &len) < 0)
        return NULL;
    if (len != NLSE_CUDA_IPC_BYTES)
        return PyErr_Format(PyExc_ValueError, "an IPC handle has %d bytes, got %zd",
                            NLSE_CUDA_IPC_BYTES, len);
    void *ptr = NULL;
    int st = nlse_cuda_ipc_open(buf, &ptr); /* before ptr is read */
    return addr_or_raise(st, ptr);
}

static PyObject *m_ipc_close(PyObject *Py_UNUSED(m), PyObject *arg)
{
    return release_address(arg, nlse_cuda_ipc_close);
}

static PyObject *m_device_name(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    char buf[256];
    int st = nlse_cuda_device_name(buf, (int)sizeof buf);
    if (st)
        return nlsepy_raise(st);
    return PyUnicode_FromString(buf);
}

static PyObject *m_mem_info(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    size_t fr = 0, tot = 0;
    int st = nlse_cuda_mem_info(&fr, &tot);
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("(nn)", (Py_ssize_t)fr, (Py_ssize_t)tot);
}

static PyObject *m_copy_bandwidth(PyObject *Py_UNUSED(m), PyObject *args)
{
    Py_ssize_t bytes;
    int reps = 20, st;
    double gbps = 0;
    if (!PyArg_ParseTuple(args, "n|i", &bytes, &reps))
        return NULL;
    if (bytes <= 0)
        return PyErr_Format(PyExc_ValueError, "bytes must be > 0, got %zd", bytes);
    Py_BEGIN_ALLOW_THREADS
    st = nlse_cuda_copy_bandwidth((size_t)bytes, reps, &gbps);
    Py_END_ALLOW_THREADS
    if (st)
        return nlsepy_raise(st);
    return PyFloat_FromDouble(gbps);
}
#endif

static PyMethodDef module_methods[] = {
#ifdef NLSEPY_WITH_CUDA
    {"device_count", m_device_count, METH_NOARGS, "Number of CUDA devices."},
    {"device_name", m_device_name, METH_NOARGS, "Name of the current CUDA device."},
    {"host_register", m_host_register, METH_O,
     "host_register(array): page-lock the array's memory (fast copies to and from the GPU); "
     "host_unregister(array) before the array is freed."},
    {"host_unregister", m_host_unregister, METH_O, "host_unregister(array): undo host_register."},
    {"device_alloc", m_device_alloc, METH_O, "device_alloc(bytes) -> address (device memory)."},
    {"device_free", m_device_free, METH_O, "device_free(address)."},
    {"ipc_handle", m_ipc_handle, METH_O,
     "ipc_handle(address) -> bytes: the CUDA IPC handle of a device_alloc buffer."},
    {"ipc_open", m_ipc_open, METH_O,
     "ipc_open(handle) -> address of another process's buffer in this one."},
    {"ipc_close", m_ipc_close, METH_O, "ipc_close(address): unmap an ipc_open buffer."},
    {"set_device", m_set_device, METH_O,
     "set_device(i): make CUDA device i current (solvers made afterwards live there)."},
    {"current_device", m_current_device, METH_NOARGS,
     "The calling thread's current CUDA device (a solver's calls leave it as they found it)."},
    {"mem_info", m_mem_info, METH_NOARGS, "(free, total) bytes of the current CUDA device."},
    {"copy_bandwidth", m_copy_bandwidth, METH_VARARGS,
     "copy_bandwidth(bytes, reps=20) -> GB/s of device-to-device copies (read + write)."},
#endif
    {"set_num_threads", m_set_num_threads, METH_O, "Set the OpenMP thread count."},
    {"get_num_threads", m_get_num_threads, METH_NOARGS, "OpenMP threads in use."},
    {"max_threads", m_max_threads, METH_NOARGS, "The most threads set_num_threads accepts."},
    {"threads_in_region", m_threads_in_region, METH_NOARGS,
     "Threads a kernel's parallel region runs on from the calling thread."},
    {"have_openmp", m_have_openmp, METH_NOARGS, "True when built with OpenMP."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = MODULE_NAME,
#ifdef NLSEPY_WITH_CUDA
    .m_doc = "nlsepy CUDA backend.",
#else
    .m_doc = "nlsepy CPU backend (C99 + OpenMP).",
#endif
    .m_size = -1,
    .m_methods = module_methods,
};

/* The models this extension implements: stem, Python class, registration. */
static const struct {
    const char *stem, *model;
    int (*bind)(PyObject *);
} models[] = {
    {"fd", "NLSE", nlsepy_bind_fd},
    {"dipolar", "DipolarGPE", nlsepy_bind_dipolar},
    {"magnet", "CoaxialMagnet", nlsepy_bind_magnet},
    {"mbloch", "MaxwellBloch", nlsepy_bind_mbloch},
    {"dec", "DecGPE", nlsepy_bind_dec},
};
#define NMODELS ((Py_ssize_t)(sizeof models / sizeof models[0]))

PyMODINIT_FUNC NLSE_CAT(PyInit_, NLSEPY_MODULE)(void)
{
    if (nlsepy_bind_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    PyObject *names = PyTuple_New(NMODELS), *stems = PyTuple_New(NMODELS);
    if (!names || !stems)
        goto fail;
    for (Py_ssize_t q = 0; q < NMODELS; ++q) {
        if (models[q].bind(m) < 0)
            goto fail;
        PyTuple_SET_ITEM(names, q, PyUnicode_FromString(models[q].model));
        PyTuple_SET_ITEM(stems, q, PyUnicode_FromString(models[q].stem));
    }
    if (PyModule_AddIntConstant(m, "COMPLEX64", NLSE_COMPLEX64) < 0 ||
        PyModule_AddIntConstant(m, "COMPLEX128", NLSE_COMPLEX128) < 0 ||
        PyModule_AddObject(m, "MODELS", names) < 0)
        goto fail;
    names = NULL;
    if (PyModule_AddObject(m, "STEMS", stems) < 0)
        goto fail;
    return m;
fail:
    Py_XDECREF(names);
    Py_XDECREF(stems);
    Py_DECREF(m);
    return NULL;
}
