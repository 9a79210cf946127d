/* Stand-in for libcudnn_cnn_infer.so.8 / libcudnn_graph.so.9: dlopen()ed by libcudnn.so.N, and itself
 * dlopen()s the leaf library (cnn_train / engines) by soname.  Loaded by dlopen(), it inherits no
 * RPATH chain, so without help that second dlopen() fails in an RPATH-only stack. */
#include <dlfcn.h>
#include <stdio.h>

int cudnn_sublib_entry(int x)
{
    void *handle = dlopen(LEAF, RTLD_NOW);
    if (!handle) {
        fprintf(stderr, "Could not load library %s. Error: %s\n", LEAF, dlerror());
        return -1;
    }
    int (*kernel)(int) = (int (*)(int))dlsym(handle, "cudnn_leaf_kernel");
    return kernel ? kernel(x) + 1 : -1;
}
