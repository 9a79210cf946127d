/* Stand-in for libcudnn.so.N: like the real one, it dlopen()s a sub-library by soname on first use. */
#include <dlfcn.h>
#include <stdio.h>

int cudnnConvolutionForward(int x)
{
    void *handle = dlopen(SUBLIB, RTLD_NOW);
    if (!handle) {
        fprintf(stderr, "Could not load library %s. Error: %s\n", SUBLIB, dlerror());
        return -1;
    }
    int (*entry)(int) = (int (*)(int))dlsym(handle, "cudnn_sublib_entry");
    return entry ? entry(x) : -1;
}
